"""The adapter protocol and `MethodSpec` live in `bench.train.method` (the harness owns them); re-exported here for
method modules and plug-ins written against `methods.base`."""

from bench.train.method import MethodAdapter, MethodSpec

__all__ = ["MethodAdapter", "MethodSpec"]
