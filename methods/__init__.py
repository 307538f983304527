"""Training-method adapters and their registry (`get_method("laser3")`)."""

from methods.base import MethodAdapter, MethodSpec
from methods.registry import UnknownMethodError, all_methods, all_names, get_method, register

__all__ = ["MethodAdapter", "MethodSpec", "UnknownMethodError", "all_methods", "all_names", "get_method", "register"]
