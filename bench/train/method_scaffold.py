"""`bench method new NAME`: a one-file method to start from, runnable as written (`bench method check` passes it).

The file is the small contract (`lenbench.contrastive`, bench.train.positives) at its smallest: a function of a
whole batch of texts giving each its positive (its words shuffled), and a config with one hyper-parameter declared
with its range (`hp`). Fifteen lines, two lenbench names.
"""

from __future__ import annotations

from pathlib import Path

from bench.runtime.errors import ConfigError
from bench.runtime.plugins import is_slug

TEMPLATE = '''\
from dataclasses import dataclass

from lenbench import contrastive, hp


@dataclass
class Config:  # each field is a --hp {name}.FIELD=VALUE, checked against its range
    min_words: int = hp(2, ge=1, le=512)


@contrastive(name="{name}", config=Config)
def positives(texts, config, rng):
    """text vs its words shuffled"""
    words = [text.split() for text in texts]  # a whole batch at once; None skips a text
    return [" ".join(rng.sample(w, len(w))) if len(w) >= config.min_words else None for w in words]
'''


def render(name: str) -> str:
    return TEMPLATE.format(name=name)


def default_path(name: str) -> Path:
    return Path(f"{name}.py")


def write(name: str, out: str | Path | None = None) -> Path:
    """Write the method NAME to `out` (default ./NAME.py); ConfigError, one line, for a NAME that is not a slug or
    is taken by a built-in or installed method, or a file that already exists (never overwritten)."""
    from bench.train.method_file import name_problem
    from bench.train.registry import METHODS

    problem = name_problem(name, METHODS)
    if problem is not None:
        hint = " (`bench methods` lists the names taken)" if is_slug(name) else ""  # a clash: where to look
        raise ConfigError(problem + hint)
    path = Path(out) if out is not None else default_path(name)
    if path.exists():
        raise ConfigError(f"{path} already exists; give another --out FILE (an existing file is never overwritten)")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("x", encoding="utf-8") as handle:  # "x": a file that appears meanwhile is not overwritten either
        handle.write(render(name))
    return path
