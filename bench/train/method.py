"""The method-adapter protocol and the registry entry type: what one training method declares and does; the shared
trainer does the rest. Methods (built-in ones in `methods/`, plug-ins elsewhere) import these types from here and
register through the `lenbench.methods` entry-point group (`bench.train.registry`); the harness never imports them.

An adapter turns raw training texts into a batch and a batch into a loss. It never owns the optimiser, the
schedule, the budget, checkpoints or logging: those belong to the shared trainer (`bench.train`), so every
method in a comparison is trained under exactly the same protocol.

Lifecycle, as the trainer drives it:
    adapter = spec.build(config, tokenizer=tok, max_len=..., seed=...)
    extra = adapter.setup(encoder_model)            # extra trainable modules (decoder, MLM head...) or []
    for step:
        batch = adapter.make_batch(texts, rng)        # raw texts -> tensors (CPU); None if no usable pair
        loss, logs = adapter.loss(encoder_model, batch)  # scalar loss + floats to log
        ...optimiser step...
        adapter.after_step(encoder_model)             # e.g. EMA update of a momentum encoder
    adapter.state_dict() / load_state_dict(...)       # extra state for --resume (queue, EMA weights...)

`setup`, `after_step`, `state_dict` and `load_state_dict` have no-op defaults in `BaseAdapter`. The optional members
(`AdapterHooks`: `name`, `accepts`, `shard_trim`, `prepare`) are declared once, with their defaults, in `AdapterHooks`;
the trainer and the batch loader read them through `AdapterHooks.of(adapter)`, so an adapter that does not subclass
`BaseAdapter` gets the same defaults.

A method's `MethodSpec.version` (default 1) is part of each of its runs' identity: bump it when a change to the
adapter makes the same config and seed train differently (another loss, another use of the rng); a change that
trains the same (speed, messages) keeps it. The shared trainer's own version is bench.train.config.TRAIN_RECIPE_VERSION.

`make_batch` may run ahead of the step that uses it, in a worker process (bench.train.loader): it must depend only on
its texts and the rng it is given (and the adapter's settings), never on training state. An adapter whose texts are
split into sentences (`bench.data.sentences.split_sentences`) sets `splits_sentences = True`: the trainer then
splits the whole corpus once before training (in parallel, cached on disk: bench.data.sentence_cache). An optional
`prepare(texts, workers)` (BaseAdapter's does the splits) is called once before the first batch for any other
per-corpus preprocessing (the pair methods tokenise the corpus's fixed strings there: methods/pairs.py).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # in annotations only: looking a method up (its name, defaults, config) loads no torch
    import torch


@runtime_checkable
class MethodAdapter(Protocol):
    name: str

    def setup(self, model: torch.nn.Module) -> list[torch.nn.Module]:
        """Build training-only modules around the encoder; return those the optimiser must also train."""
        ...

    def make_batch(self, texts: list[str], rng: random.Random) -> dict[str, Any] | None:
        """Raw texts -> a batch of tensors (and counts: 'n_examples', 'n_tokens')."""
        ...

    def loss(self, model: torch.nn.Module, batch: dict[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        ...

    def after_step(self, model: torch.nn.Module) -> None:
        ...

    def state_dict(self) -> dict[str, Any]:
        ...

    def load_state_dict(self, state: dict[str, Any]) -> None:
        ...


@dataclass(frozen=True)
class AdapterHooks:
    """The adapter protocol's optional members, each with the default the trainer uses when an adapter lacks it.

    name: the method's name in messages, the progress bar and the checkpoint fingerprint ("" when unnamed);
    accepts(text) -> bool: whether the method can use a text at all (crop: at least two chunks); texts it refuses
        are skipped before they take a batch slot (None: every text);
    shard_trim: key prefixes (e.g. "anchor_") whose `<prefix>attention_mask` marks padding that each rank's shard
        may drop on several processes (bench.train.sharding.shard_batch);
    prepare(texts) -> dict: per-corpus preprocessing once before the first batch (None: nothing to do);
    where: `FILE:LINE` of the method's code when it comes from a method file ("" otherwise).
    """

    name: str = ""
    accepts: Callable[[str], bool] | None = None
    shard_trim: tuple[str, ...] = ()
    prepare: Callable[..., dict[str, Any]] | None = None
    where: str = ""  # FILE:LINE of a method file's code (methods/positives.py), named when no draw gives a batch

    @classmethod
    def of(cls, adapter: Any) -> "AdapterHooks":
        """The adapter's optional members, the declared default for each it does not define."""
        return cls(**{f.name: getattr(adapter, f.name, f.default) for f in fields(cls)})

    @property
    def label(self) -> str:
        return self.name or "?"


class BaseAdapter:
    """The protocol's optional hooks as no-ops: an adapter that trains no extra module, does nothing after a step and
    keeps no state between steps subclasses this and writes `make_batch` and `loss` only."""

    splits_sentences = False  # True: the trainer prepares the corpus's sentence splits before the first batch

    def prepare(self, texts: Sequence[str], workers: int | None = None) -> dict[str, Any]:
        """Per-corpus preprocessing, once before training (cached on disk by corpus fingerprint): here the sentence
        splits when `splits_sentences`. Returns what it did, for the log."""
        if not self.splits_sentences:
            return {}
        from bench.data import sentence_cache

        done = sentence_cache.prepare(texts, workers)
        return {"sentences": {"cached": done.cached, "seconds": round(done.seconds, 3)}}

    def setup(self, model: torch.nn.Module) -> list[torch.nn.Module]:
        return []

    def after_step(self, model: torch.nn.Module) -> None:
        return None

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        return None


@dataclass(frozen=True)
class MethodSpec:
    """A registry entry: name, paper, defaults (a dataclass type) and a factory."""

    name: str
    paper: str
    summary: str
    config_cls: type
    factory: Any  # callable(config, *, tokenizer, max_len, seed) -> MethodAdapter
    trains: bool = True  # False for `vanilla`: no training at all
    # True when the training task needs a contextual encoder (a masked token predicted from its neighbours): such a
    # method is refused on the bare embedding bag (`--backbone embedding-bag`), where every token is its own vector.
    needs_context: bool = False
    aliases: tuple[str, ...] = field(default_factory=tuple)
    # The version of this method's own recipe (its adapter's batches and loss). Recorded in each trained run's config
    # and config hash (`method_version`), so a run trained by older code of the method is never reused for a new
    # request nor pooled with its seeds. Bump it when a change makes the same config and seed train differently
    # (another loss, another use of the batch rng); a change that trains the same (speed, messages) keeps it.
    version: int = 1
    # A control (methods/controls.py): a trivial augmentation that shares a treatment's anchor and budget and changes
    # only the positive, trained to test a paper's claim (claims/*.toml) rather than as a method of its own; `claim`
    # says which claim it tests. The leaderboard and `bench methods` show controls apart.
    control: bool = False
    claim: str = ""
    # What to cite when a table shows this method: keys of bench/report/references.bib, or whole BibTeX entries
    # (a plug-in's own paper); `bench results --cite` collects them (bench.report.citations).
    cite: tuple[str, ...] = ()
    # A method defined in a file passed by path (`--method ./my_method.py`, bench.train.method_file): the file, the
    # sha256 of its bytes (recorded in each run's config and hash, so an edit gives new runs) and the line that
    # defines the method (messages name it). Empty for a method registered by name.
    source_file: str = ""
    source_sha256: str = ""
    source_line: int = 0

    @property
    def where(self) -> str:
        """`FILE:LINE` of a method defined in a file ('' for a registered one): how messages name it."""
        return f"{self.source_file}:{self.source_line or 1}" if self.source_file else ""

    def __post_init__(self) -> None:
        if not isinstance(self.version, int) or isinstance(self.version, bool) or self.version < 1:
            raise ValueError(f"method {self.name!r}: version {self.version!r} is not a whole number >= 1")

    def defaults(self) -> Any:
        return self.config_cls()

    def build(self, config: Any = None, **kwargs: Any) -> MethodAdapter:
        return self.factory(config if config is not None else self.defaults(), **kwargs)

    def config_from(self, overrides: dict[str, Any]) -> Any:
        """Defaults with overrides applied and validated (type from the annotation, range from `hp(...)`, then the
        config's own __post_init__); an unknown key is an error that lists the known ones. Raises ValueError."""
        from bench.train.hparams import check_ranges, check_types

        known = {f.name: f for f in fields(self.config_cls)}
        unknown = sorted(set(overrides) - set(known))
        if unknown:
            raise ValueError(
                f"method {self.name!r} has no hyper-parameter(s) {unknown}; known: {sorted(known)}"
            )
        config = self.config_cls(**check_types(self.name, self.config_cls, overrides))
        check_ranges(self.name, config)
        return config
