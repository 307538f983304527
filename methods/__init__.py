"""Built-in training-method adapters (one module per method). Each module defines its `MethodSpec`; pyproject.toml
registers them in the `lenbench.methods` entry-point group, read by `bench.train.registry`, exactly as a plug-in would.
The registry functions are re-exported here for convenience (`from methods import get_method`)."""

from bench.train.method import MethodAdapter, MethodSpec
from bench.train.registry import UnknownMethodError, all_methods, all_names, get_method, register

__all__ = ["MethodAdapter", "MethodSpec", "UnknownMethodError", "all_methods", "all_names", "get_method", "register"]
