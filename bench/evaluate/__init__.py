"""Scoring an encoder: the suites (STS, retrieval, kNN, MTEB, length diagnostics, held-out), the length attacks
applied to their texts, the BM25 lexical baseline, `--model` resolution and the runner that writes each
dataset's scores to the results database as soon as it is done.

Owns: turning an encoder and an evaluation context into score records. Never: trains, prints comparison tables
(that is `bench.report`), parses CLI options.
"""
