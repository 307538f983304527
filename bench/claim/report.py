"""What `bench claim` prints and stores: one row per (comparator, dataset, variant) and one line saying whether the
claim holds at that scale."""

from __future__ import annotations

from collections.abc import Sequence

from bench.claim.spec import ClaimSpec
from bench.report.verdicts import HOLDS, Verdict, overall, verdict_frame


def verdict_rows(spec: ClaimSpec, found: Sequence[Verdict], missing_rows: Sequence[dict]) -> list[dict]:
    """Stored and shown rows, in the file's order (tests outer, comparators inner); each with its comparator's role."""
    role = {c.name: c.role for c in spec.comparators}
    by_key = {(v.comparator, v.dataset, v.variant): v.as_dict() for v in found}
    by_key.update({(m["comparator"], m["dataset"], m["variant"]): m for m in missing_rows})
    rows = []
    for test in spec.tests:
        for c in spec.comparators:
            row = by_key.get((c.name, test.dataset, test.variant))
            if row is not None:
                rows.append({**row, "role": role[c.name], "threshold": test.threshold})
    return rows


def table(rows: Sequence[dict], treatment: str) -> str:
    return verdict_frame(rows, treatment).to_string(index=False)


def scale_words(spec: ClaimSpec, scale: str) -> str:
    o = spec.scales[scale]
    parts = [str(o.get(k)) for k in ("backbone",) if o.get(k)]
    if o.get("budget"):
        parts.append(f"{o['budget']} at batch {o.get('batch_size', 16)}, max_len {o.get('max_len', 64)}, lr {o.get('lr', 3e-5)}")
    if o.get("limit"):
        parts.append(f"{o['limit']} evaluation items")
    return f"scale {scale} ({'; '.join(parts)})" if parts else f"scale {scale}"


def summary(spec: ClaimSpec, scale: str, rows: Sequence[dict]) -> tuple[str, str]:
    """(holds | does not hold | incomplete, the one line that says so)."""
    verdict = overall(rows, spec.family_size)
    where = scale_words(spec, scale)
    if verdict == "holds":
        against = ", ".join(c.name for c in spec.comparators)
        tests = ", ".join(t.label for t in spec.tests)
        return verdict, (f"claim {spec.name} HOLDS at {where}: {spec.treatment} beats {against} on {tests} "
                         f"({len(rows)} comparisons, Holm-corrected at alpha {spec.alpha})")  # fmt: skip
    failing = [r for r in rows if r["verdict"] != HOLDS]
    named = "; ".join(f"{r['verdict']} against {r['comparator']} on {r['dataset']} {r['variant']}" for r in failing[:6])
    more = f" (and {len(failing) - 6} more)" if len(failing) > 6 else ""
    if verdict == "incomplete":
        return verdict, f"claim {spec.name} at {where}: INCOMPLETE, runs or scores missing: {named}{more}"
    return verdict, f"claim {spec.name} does NOT hold at {where}: {named}{more}"


def stored_claims_text(stored: Sequence[dict]) -> str:
    """`bench results`: the newest stored verdict of each (claim, scale), its line and its rows."""
    if not stored:
        return ""
    parts = ["claims (bench claim: the newest verdict per claim and scale; the treatment minus each comparator, "
             "interval at its Holm level over the claim's comparisons)"]
    for v in stored:
        parts += [f"{v['claim']} [{v['scale']}] {v['verdict'].upper()}  ({v['created_at']:%Y-%m-%d %H:%M} UTC)",
                  f"  {v['summary']}", table(v["rows"], v["treatment"]), ""]
    return "\n".join(parts)
