"""Texts -> vectors: the transformers encoder (`encoder`: the chunked, cached pipeline), which model a name means
and how it loads (`loading`), the backends that run its batches (`backends`: torch, ONNX Runtime), batch plans,
the on-disk embedding cache, weight-file policy, packaged backbones, model size facts and sharded encoding under
torchrun.

Owns: loading a model and encoding texts with it in bounded memory. Never: trains, scores, reads datasets or
touches the results database.
"""
