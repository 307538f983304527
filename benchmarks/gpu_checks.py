"""The acceptance table of benchmarks/gpu.py (issue 36 and after): PASS/FAIL per line from the figures measured."""

from __future__ import annotations

from typing import Any

import numpy as np

import gpu_claim
import gpu_scale


# ------------------------------------------------------------------------------------------- checks
def passing_precisions(rows: list[dict[str, Any]], tolerance: float = 0.1) -> list[str]:
    """lenbench precisions whose STS-B and SciFact scores are within `tolerance` of lenbench fp32's."""
    fp32 = next(r for r in rows if r["encoder"] == "lenbench fp32")
    measured = [k for k in ("stsb", "scifact") if not np.isnan(fp32[f"{k}_score"])]  # the smoke run scores STS-B only
    return list(dict.fromkeys(r["precision"] for r in rows if r["encoder"].startswith("lenbench") and all(
        abs(r[f"{k}_score"] - fp32[f"{k}_score"]) <= tolerance for k in measured)))  # fmt: skip


def checks(result: dict[str, Any], auto: str) -> list[dict[str, Any]]:
    """The issue-36 acceptance table: (check, measured, target, passed)."""
    out: list[dict[str, Any]] = []

    def add(check: str, measured: float | None, target: str, passed: bool | None) -> None:
        out.append({"check": check, "measured": None if measured is None else round(float(measured), 3),
                    "target": target, "passed": passed})  # fmt: skip

    minilm = result.get("encode", [])
    if minilm:
        st = next(r for r in minilm if r["encoder"] == "sentence-transformers fp32")
        ours = next(r for r in minilm if r["encoder"] == f"lenbench {auto}")
        fp32 = next(r for r in minilm if r["encoder"] == "lenbench fp32")
        ratio = ours["scifact_texts_per_s"] / st["scifact_texts_per_s"]
        add("MiniLM SciFact corpus+queries vs ST fp32 (token ids cached)", ratio, ">= 5x", ratio >= 5)
        ratio = ours["stsb_texts_per_s"] / st["stsb_texts_per_s"]
        add("MiniLM STS-B vs ST fp32", ratio, ">= 3x", ratio >= 3)
        capped = next((r for r in minilm if r["encoder"] == f"lenbench {auto} rows<=64"), None)
        if capped is not None:  # information: the default batch rows against 64
            add("  (the same, SciFact, at --batch-size 64: vs ST fp32)", capped["scifact_texts_per_s"] / st["scifact_texts_per_s"],
                "information", None)  # fmt: skip
        add("GPU busy while encoding the corpus (%)", ours["corpus_gpu_util_mean"], ">= 80",
            None if ours["corpus_gpu_util_mean"] is None else ours["corpus_gpu_util_mean"] >= 80)
        for key in ("stsb", "scifact"):
            diff = abs(ours[f"{key}_score"] - fp32[f"{key}_score"])
            add(f"{key} score at {auto} vs lenbench fp32 (abs. difference)", diff, "<= 0.1", diff <= 0.1)
        passing = passing_precisions(minilm)
        candidates = [r for r in minilm if r["encoder"].startswith("lenbench") and r["precision"] in passing]
        fastest = max(candidates, key=lambda r: r["scifact_texts_per_s"])["precision"] if candidates else None
        add(f"auto ({auto}) is the fastest passing precision ({fastest}; passing: {', '.join(passing)})", None,
            "equal", fastest == auto)  # fmt: skip
        if result.get("cold"):
            ratio = result["cold"]["scifact_texts_per_s"] / st["scifact_texts_per_s"]
            add("MiniLM SciFact vs ST fp32, token cache cold", ratio, ">= 2x", ratio >= 2)
        if result.get("ceiling"):
            best = max(r["texts_per_s"] for r in result["ceiling"])
            share = ours["corpus_texts_per_s"] / best
            add("lenbench corpus texts/s / ceiling (best precision, batch 1,024)", share, ">= 0.5", share >= 0.5)
    base = result.get("encode_base", [])
    if base:
        st = next(r for r in base if r["encoder"] == "sentence-transformers fp32")
        ours = next(r for r in base if r["encoder"] == f"lenbench {auto}")
        ratio = ours["scifact_texts_per_s"] / st["scifact_texts_per_s"]
        add("base-size SciFact corpus+queries vs ST fp32 (token ids cached)", ratio, ">= 3x", ratio >= 3)
    for row in result.get("passes", []):
        add(f"first pass / second pass, {row['set']}, every cache off", row["ratio"], "<= 1.25", row["ratio"] <= 1.25)
    whole = result.get("whole_process")
    if whole:
        ratio = whole["bench_eval_s"] / whole["sentence_transformers_script_s"]
        add("bench eval --suite beir:scifact / plain ST script (wall time)", ratio, "<= 1.0", ratio <= 1.0)
    found = result.get("search")
    if found:
        add("search: GPU top-10 places equal to the CPU's (share)", found["top10_same_place"], "information", None)
        diff = abs(found["ndcg_accelerator"] - found["ndcg_cpu"])
        add("search: SciFact nDCG@10, GPU search vs CPU search (abs. difference)", diff, "<= 0.01", diff <= 0.01)
    for check in gpu_claim.claim_checks(result.get("claim") or {}):
        add(*check)
    for check in gpu_scale.scale_checks(result.get("scale") or {}):
        add(*check)
    return out


def print_checks(rows: list[dict[str, Any]]) -> None:
    print("acceptance (issues 36, 41, 43):")
    for r in rows:
        mark = {True: "PASS", False: "FAIL", None: " n/a"}[r["passed"]]
        shown = "" if r["measured"] is None else f"{r['measured']:>9}"
        print(f"  [{mark}] {r['check']:78s} {shown:>9} (target {r['target']})")
