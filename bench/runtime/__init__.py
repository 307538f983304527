"""Process-level facilities every stage uses: user-facing error types, provenance (hashes, versions,
fingerprints), signal handling, the torchrun process group and the run heartbeat.

Owns: nothing about embeddings. Never imports another `bench` stage (data, encode, train, evaluate, report,
commands): everything else may import it.
"""
