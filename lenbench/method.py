"""`contrastive`: a method made of a function that gives each text its positive, in one file, three names at most.

    # my_method.py                     bench run --method ./my_method.py --hp shuffle.min_words=3
    from dataclasses import dataclass
    from lenbench import contrastive, hp

    @dataclass
    class Config:
        min_words: int = hp(2, ge=1)

    @contrastive(config=Config)
    def shuffle(texts, config, rng):  # a batch of texts -> one positive each (None: skip the text)
        return [" ".join(rng.sample(t.split(), len(t.split()))) if len(t.split()) >= config.min_words else None
                for t in texts]

The function's name is the method's (`_` becomes `-`), its docstring's first line the summary. The config's fields
are its --hp values, declared once with their ranges (`hp`); a `temperature` or `pooling` field there is used by the
InfoNCE loss (else 0.05 and mean). `per_text=True` takes a function of one text, batched by lenbench.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, is_dataclass
from typing import Any

from bench.train.hparams import hp
from bench.train.method import MethodSpec
from bench.train.method_file import MARK
from bench.train.positives import PositivesContract

__all__ = ["contrastive", "hp"]


@dataclass
class NoConfig:
    """The config of a method that declares no hyper-parameter."""


@dataclass(frozen=True)
class PositivesFactory:
    """The spec's factory: builds the adapter of methods/positives.py around the contract."""

    name: str
    contract: PositivesContract

    def located(self, shown: str) -> "PositivesFactory":
        return PositivesFactory(self.name, self.contract.located(shown))

    def __call__(self, config: Any, *, tokenizer: Any, max_len: int, seed: int = 0, **_: Any) -> Any:
        from methods.positives import PositivesAdapter

        return PositivesAdapter(config, contract=self.contract, name=self.name, tokenizer=tokenizer, max_len=max_len,
                                seed=seed)  # fmt: skip


def contrastive(fn: Callable[..., Any] | None = None, *, name: str | None = None, config: type | None = None,
                per_text: bool = False, summary: str = "", paper: str = "(yours)", version: int = 1,
                cite: tuple[str, ...] = ()) -> Any:  # fmt: skip
    """Mark `fn` as a contrastive method (see the module docstring); the function itself is returned unchanged,
    carrying its MethodSpec, so it stays callable (and importable by reference in loader workers)."""

    def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
        if config is not None and not (isinstance(config, type) and is_dataclass(config)):
            raise TypeError(f"contrastive(config=...) takes a @dataclass class of hyper-parameters, got {config!r}")
        method = name or fn.__name__.replace("_", "-")
        doc = (fn.__doc__ or "").strip().splitlines()
        setattr(fn, MARK, MethodSpec(
            name=method, paper=paper, summary=summary or (doc[0] if doc else f"text vs {fn.__name__}(text), InfoNCE"),
            config_cls=config or NoConfig, factory=PositivesFactory(method, PositivesContract(fn, per_text)),
            version=version, cite=tuple(cite), source_line=fn.__code__.co_firstlineno,
        ))
        return fn

    return mark(fn) if fn is not None else mark
