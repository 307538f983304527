"""What a result is: the settings a run's or an evaluation's config hash is taken over, with `auto` resolved.

One function says how texts were scored (`scoring_identity`), for `bench run`'s rows (the "eval" part of their
config) and `bench eval`'s (the top level of theirs), and one what a training ran at (`training_identity`). A
precision of `auto` (and a device of None) is resolved first, by the function the encoder and the trainer call
(bench.encode.auto.resolve_auto), so a CPU run (fp32) and a CUDA run of the same command (fp16 weights when scoring, bf16 autocast when
training) never share a config hash, and rows of different precisions never pool. An evaluation at fp32 leaves the
precision out, as every row written before it was recorded did. Rows already in a database whose hash left the
precision out are re-keyed from what their runtime recorded (results_db.migrations, schema 7).
"""

from __future__ import annotations

from typing import Any

from bench.encode.options import EncoderOptions, hashed_batch_size


def resolved_precisions(encoder: EncoderOptions) -> tuple[str, str]:
    """(the evaluation's precision, the training autocast's) as they run on `encoder.device` (None: this machine's
    default device): `auto` resolved by bench.runtime.device."""
    from bench.encode.auto import resolve_auto

    auto = resolve_auto(encoder.device, encoder.precision)
    return auto.precision, auto.train_precision


def scoring_identity(settings: Any, pooling: str | None, precision: str) -> dict[str, Any]:
    """How texts were scored (`settings`: an EvalSettings; `pooling` and `precision` as the encoder resolved them):
    max_len, pooling, the hashed batch size, the attack variants, the suites' options and the item limit; the
    precision when it is not fp32."""
    encoder = settings.encoder
    return {
        "max_len": encoder.max_len,
        "pooling": pooling,
        "batch_size": hashed_batch_size(encoder.batch_size),
        "elong": settings.elong,
        **({"attacks": settings.attack_params} if settings.attack_params else {}),  # only when asked: older rows hash as before
        **{k: v for k, v in settings.options.items() if v},  # the suites' options, only when given (needle_lengths)
        "limit": settings.limit,
        **({"precision": precision} if precision != "fp32" else {}),
    }


def training_identity(train: Any, precision: str) -> dict[str, Any]:
    """What a training computed (`train`: a TrainConfig): its shared settings with the precision it ran at."""
    return {**train.shared(), "precision": precision}
