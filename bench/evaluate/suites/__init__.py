"""Evaluation suites (STS, retrieval, kNN, MTEB, length diagnostics) and their registry."""

from bench.evaluate.suites.base import CLEAN, EvalContext, Suite, SuiteError, variant_name
from bench.evaluate.suites.registry import parse_suite, parse_suites, register_suite

__all__ = ["CLEAN", "EvalContext", "Suite", "SuiteError", "parse_suite", "parse_suites", "register_suite", "variant_name"]
