"""Training budgets: `steps=N,examples=N,tokens=N,seconds=N` (any subset); training stops at the first reached.

A budget is the one thing a comparison must hold equal besides the data and the backbone, so it is parsed
strictly: an unknown kind, a repeated kind, or a zero/negative limit is a `ConfigError` naming the bad part.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from bench.runtime.errors import ConfigError

BUDGET_KINDS = ("steps", "examples", "tokens", "seconds")
# Counts must fit SQLite's int64 exactly (a float above 2**53 is no longer a whole count); seconds: ten years.
BUDGET_MAX = {"steps": 2**53, "examples": 2**53, "tokens": 2**53, "seconds": 10 * 365 * 86_400}


@dataclass(frozen=True)
class Budget:
    """Limits on optimizer steps, training examples (pairs), tokens seen (both sides of a pair) and seconds."""

    steps: int | None = None
    examples: int | None = None
    tokens: int | None = None
    seconds: float | None = None

    def __post_init__(self) -> None:
        for kind in BUDGET_KINDS:
            value = getattr(self, kind)
            if value is not None and not value > 0:
                raise ConfigError(f"budget {kind}={value}: a budget limit must be positive")
            if value is not None and not value <= BUDGET_MAX[kind]:  # NaN and inf too
                raise ConfigError(f"budget {kind}={value}: at most {BUDGET_MAX[kind]:,}")
        if self.is_empty():
            raise ConfigError(f"a budget needs at least one limit: {', '.join(k + '=N' for k in BUDGET_KINDS)}")

    @classmethod
    def parse(cls, text: str) -> "Budget":
        """'steps=100,seconds=600' -> Budget(steps=100, seconds=600.0)."""
        values: dict[str, float | int] = {}
        parts = [p.strip() for p in str(text).split(",") if p.strip()]
        if not parts:
            raise ConfigError(f"empty budget {text!r}; e.g. --budget steps=100 or --budget seconds=300,examples=5000")
        for part in parts:
            kind, sep, raw = part.partition("=")
            kind = kind.strip().lower()
            if not sep:
                raise ConfigError(f"budget part {part!r} is not kind=N (kinds: {', '.join(BUDGET_KINDS)})")
            if kind not in BUDGET_KINDS:
                raise ConfigError(f"unknown budget kind {kind!r} in {text!r}; known: {', '.join(BUDGET_KINDS)}")
            if kind in values:
                raise ConfigError(f"budget kind {kind!r} given twice in {text!r}")
            try:
                number = float(raw)
            except ValueError:
                raise ConfigError(f"budget {kind}={raw!r} is not a number") from None
            if not number > 0 or number != number or number == float("inf"):
                raise ConfigError(f"budget {kind}={raw}: a budget limit must be a positive finite number")
            if number > BUDGET_MAX[kind]:
                raise ConfigError(f"budget {kind}={raw}: at most {BUDGET_MAX[kind]:,} (a larger limit cannot be stored "
                                  f"exactly, and would never be reached); e.g. --budget {kind}=1000")  # fmt: skip
            if kind != "seconds":
                if number != int(number):
                    raise ConfigError(f"budget {kind}={raw} must be a whole number")
                number = int(number)
            values[kind] = number
        return cls(**values)  # type: ignore[arg-type]

    def is_empty(self) -> bool:
        return all(getattr(self, k) is None for k in BUDGET_KINDS)

    def asked(self) -> dict[str, float | int]:
        """The limits that were set, for the Run row's budget_asked."""
        return {k: v for k, v in asdict(self).items() if v is not None}

    def label(self) -> str:
        """Canonical text (fixed kind order): equal budgets have equal labels."""
        return ",".join(f"{k}={_fmt(v)}" for k, v in self.asked().items())

    def reached(self, consumed: "Consumption") -> str | None:
        """The first limit that `consumed` has reached, or None to go on."""
        for kind in BUDGET_KINDS:
            limit = getattr(self, kind)
            if limit is not None and getattr(consumed, kind) >= limit:
                return kind
        return None

    def planned_steps(self, batch_size: int) -> int | None:
        """Steps the budget implies when steps or examples bound it (the LR schedule's horizon); else None."""
        bounds = []
        if self.steps is not None:
            bounds.append(self.steps)
        if self.examples is not None:
            bounds.append(-(-self.examples // batch_size))
        return min(bounds) if bounds else None


@dataclass
class Consumption:
    """What a run used so far; saved in checkpoints so a resumed run keeps counting from where it died."""

    steps: int = 0
    examples: int = 0
    tokens: int = 0
    seconds: float = 0.0
    peak_memory_mb: float = 0.0
    peak_memory_kind: str = ""  # "cuda_max_allocated" | "process_rss_peak"

    def as_dict(self) -> dict[str, float | int | str]:
        d = asdict(self)
        d["seconds"] = round(d["seconds"], 3)
        d["peak_memory_mb"] = round(d["peak_memory_mb"], 1)
        return d


def _fmt(v: float | int) -> str:
    return str(int(v)) if float(v).is_integer() else str(v)
