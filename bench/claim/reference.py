"""The reference row of a claim's runs in `bench results`: the comparator the claim file names `role = "reference"`,
not the default (vanilla, else the first method). A claim's runs are sweep points (sweep `claim-NAME-SCALE`, point
`variant=COMPARATOR seed=N`: bench.claim.run), and the role of each comparator is stored with the claim's verdict
(`claim_verdicts.rows`); a claim none of whose verdicts is stored yet names no reference here."""

from __future__ import annotations

from typing import Any

from bench.claim.run import claim_sweep


def claim_reference(verdicts: list[dict[str, Any]], group: list[dict], by_method: dict[str, list[int]]) -> str | None:
    """The label (a key of `by_method`) of the claim reference among one comparison's runs, or None."""
    sweeps = {str(r.get("sweep") or "") for r in group}
    for verdict in verdicts:
        sweep = claim_sweep(verdict["claim"], verdict["scale"])
        if sweep not in sweeps:
            continue
        name = next((row["comparator"] for row in verdict.get("rows") or [] if row.get("role") == "reference"), None)
        if name is None:
            continue
        ids = {int(r["id"]) for r in group if r.get("sweep") == sweep and _comparator(r.get("sweep_point")) == name}
        label = next((label for label, runs in by_method.items() if ids & set(runs)), None)
        if label is not None:
            return label
    return None


def _comparator(point: Any) -> str | None:
    """COMPARATOR of a claim point's key `variant=COMPARATOR seed=N` (bench.sweep.points.expand)."""
    for part in str(point or "").split(" "):
        if part.startswith("variant="):
            return part[len("variant="):]
    return None
