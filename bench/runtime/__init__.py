"""Process-level facilities every stage uses: user-facing error types, provenance (hashes, versions,
fingerprints), signal handling, the torchrun process group (`distributed`) and re-launching under it (`launch`),
the run heartbeat, and the registry type every plug-in group fills (`plugins.Registry`).

Owns: nothing about embeddings. Never imports another `bench` stage (data, encode, train, evaluate, report,
commands): everything else may import it.
"""
