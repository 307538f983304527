"""Texts -> vectors: the transformers encoder and its ONNX Runtime backend, batch plans, the on-disk embedding
cache, weight-file policy, packaged backbones, model size facts and sharded encoding under torchrun.

Owns: loading a model and encoding texts with it in bounded memory. Never: trains, scores, reads datasets or
touches the results database.
"""
