"""The ONNX exports the onnx backend runs (`bench.encode.backends.onnx_cpu`): the transformer plus pooling, exported
once per weights.

The graph maps (input_ids, attention_mask) -> pooled vectors (mean over the mask, or [CLS]), the same pooling as
`bench.encode.pooling.pool`; the encoder normalises. How it is made (`export_pooled`):

1. torch's TorchScript-based exporter (`torch.onnx.export(dynamo=False)`: the dynamo exporter needs onnxscript,
   which is not a dependency) traces the model with *eager* attention and a padded example batch (so the
   attention-mask path is traced). Eager, because the SDPA path exports as a decomposed subgraph that ONNX
   Runtime's fusion patterns do not recognise.
2. ONNX Runtime's transformer optimizer (`onnxruntime.transformers.optimizer`, model_type "bert", heads and width
   from the config, opt_level 0 = fusion only, still fp32) fuses embeddings + LayerNorm, attention, bias + GELU and
   residual + LayerNorm into single kernels (MiniLM/BERT: all of them; MPNet's relative attention matches no attention
   pattern, only the norms and GELU fuse). Whether that pays depends on the model and the machine: on the 2-core
   machine a random 1-layer, 32-wide BERT encoded documents 1.26x faster fused (its time is attention's softmax
   and small kernels, which fusion merges), a 2-layer 128-wide one 0.9x, all-MiniLM-L6-v2 (384 wide) between 0.9x
   and 1.12x over several measurements. So by default (`$LENBENCH_ONNX_FUSE` unset) a model at most
   `FUSE_MAX_WIDTH` wide is fused and a wider one is not: a rule of the model alone, so that the same weights run
   the same graph, and give the same scores to the digit, on every machine (timing both graphs at export would
   not: a random 2-layer model's STS-B Spearman moved by 2 points between them). `=1` fuses any model, `=0` none.
   The plain eager graph still gets ONNX Runtime's own load-time graph optimisations.
3. Both graphs run a probe batch (random ids, padded rows) against the torch model as the torch backend runs it:
   the fused graph is kept if every pooled row is within cosine MIN_COSINE (and 1e-3 in norm) of torch, else the
   plain graph if it is, else the export fails with a ModelLoadError. The probe and torch's answer are stored in
   the file's metadata, and every load re-runs the probe (a few ms) without torch: a file that is corrupt, from
   an older format, or no longer gives that answer is exported again.

The diagnostics (`diag`) need every token's vector, not one per text: `TOKENS` as the pooling exports the same
model with the last hidden states as its output (`<fingerprint>-tokens-v<FORMAT>.onnx`), probed the same way on
the mean over each row's real tokens. With it `Encoder.token_embeddings` runs on ONNX Runtime like `encode`
(torch's eager forward was 5-8x slower per batch on a busy 2-core CPU).

Stored as `<cache dir>/onnx/<fingerprint>-<pooling>-v<FORMAT>[-fused|-plain].onnx` (which graph was asked
for): the weights' fingerprint names it, so a later
run (or another process) loads the file without touching torch; FORMAT changes the name whenever the way graphs
are made changes, so an older export is never reused. Files are written to a temporary name and renamed, so a
crash never leaves a half-written model behind. `bench cache clear` removes these files too.
"""

from __future__ import annotations

import json
import logging
import mmap
import os
import re
import warnings
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bench import environment
from bench.encode.pooling import eval_mode, pool, pooled_output
from bench.runtime.errors import ModelLoadError
from bench.runtime.stores import FolderStore

if TYPE_CHECKING:
    from bench.encode.backends.base import BackendHost

TOKENS = "tokens"  # the pseudo-pooling of the token-level graph: (batch, length, dim) last hidden states
OPSET = 17
# Part of the file name. 1: SDPA export, unverified. 2: eager export + ORT transformer fusion, probe-verified.
# 3: eager export, fusion opt-in ($LENBENCH_ONNX_FUSE), probe-verified.
# 4: fused by default at most FUSE_MAX_WIDTH wide ($LENBENCH_ONNX_FUSE decides otherwise), probe-verified.
FORMAT = 4
FUSE_ENV = "LENBENCH_ONNX_FUSE"  # 1: fuse, 0: never, unset: by the model's width (module docstring)
FUSE_MAX_WIDTH = 64
MIN_COSINE = 0.9999
MAX_NORM_ERROR = 1e-3  # relative, on the pooled (unnormalised) vectors: kNN uses them raw
PROBE_LENGTHS = (24, 17, 9, 3)  # rows of the probe batch: full, padded, padded, nearly all padding
META_KEY = "lenbench"


@lru_cache(maxsize=1)
def onnxruntime_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("onnxruntime") is not None


FOLDER = "onnx"  # under the cache folder
# The names `onnx_path` gives (any FORMAT), and those of a write that was interrupted: bench.runtime.writes's hidden
# temporary name, or the `.<name>.<pid>.tmp` of lenbench before it.
FILE_NAME = re.compile(r"[0-9a-f]{8,64}-(mean|cls|tokens)-v\d+(-fused|-plain)?\.onnx")
TEMPORARY_NAME = re.compile(r"\.[0-9a-f]{8,64}-(mean|cls|tokens)-v\d+(-fused|-plain)?\.onnx\.\d+(-[0-9a-f]{8}\.part|\.tmp)")
META_BYTES = b"\x0a\x08lenbench"  # the protobuf bytes of the metadata key (META_KEY) every export carries


def onnx_path(cache_dir: str | os.PathLike[str], fingerprint: str, pooling: str, fused: bool = False) -> Path:
    """The export's file; `fused`: whether the fused graph was asked for."""
    return Path(cache_dir) / FOLDER / f"{fingerprint}-{pooling}-v{FORMAT}-{'fused' if fused else 'plain'}.onnx"


def fusion_asked(width: int | None, pooling: str) -> bool:
    """$LENBENCH_ONNX_FUSE when set, else whether the model is at most FUSE_MAX_WIDTH wide; never for TOKENS."""
    if pooling == TOKENS:
        return False
    asked = environment.optional_flag(FUSE_ENV)
    return asked if asked is not None else width is not None and width <= FUSE_MAX_WIDTH


def probe_batch(config: Any, seed: int = 0) -> dict[str, np.ndarray]:
    """A padded batch of random token ids from the model's vocabulary (pad and low special ids avoided)."""
    vocab = int(getattr(config, "vocab_size", 1000) or 1000)
    rng = np.random.default_rng(seed)
    width = max(PROBE_LENGTHS)
    pad = getattr(config, "pad_token_id", None)
    ids = rng.integers(min(1000, vocab // 2), vocab, size=(len(PROBE_LENGTHS), width)).astype(np.int64)
    mask = np.zeros_like(ids)
    for row, n in enumerate(PROBE_LENGTHS):
        mask[row, :n] = 1
        ids[row, n:] = pad if pad is not None else 0
    return {"input_ids": ids, "attention_mask": mask}


def agreement(got: np.ndarray, want: np.ndarray) -> tuple[float, float]:
    """(min cosine, max relative norm error) between two (rows, dim) matrices of pooled vectors."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        return -1.0, float("inf")
    ng, nw = np.linalg.norm(got, axis=1), np.linalg.norm(want, axis=1)
    cos = np.einsum("ij,ij->i", got, want) / np.maximum(ng * nw, 1e-30)
    return float(cos.min()), float(np.max(np.abs(ng - nw) / np.maximum(nw, 1e-30)))


def agrees(got: np.ndarray, want: np.ndarray) -> bool:
    cos, norm_error = agreement(got, want)
    return cos >= MIN_COSINE and norm_error <= MAX_NORM_ERROR


def export_pooled(model: Any, pooling: str, path: Path, fingerprint: str = "", fuse: bool = False) -> dict[str, Any]:
    """Export model + pooling to `path` (atomically): with `fuse`, the fused graph if it agrees with torch on the
    probe, else the plain one (see the module docstring). Returns the metadata stored in the file. The model is left
    as it was."""
    import onnx

    probe = probe_batch(model.config)
    want = probe_view(torch_pooled(model, pooling, probe), probe, pooling)
    plain = trace_graph(model, pooling)
    candidates: list[tuple[str, Any, dict[str, int]]] = []
    notes: list[str] = []
    if fuse:
        try:
            fused, stats = fuse_graph(plain, model.config)
            if stats:
                candidates.append(("fused", fused, stats))
            else:
                notes.append("no fusion pattern matched")
        except Exception as exc:  # noqa: BLE001 - any optimizer failure means: use the plain graph
            notes.append(f"fusion failed: {type(exc).__name__}: {exc}")
    candidates.append(("plain", plain, {}))
    for kind, graph, stats in candidates:
        try:
            got = probe_view(OnnxPooledModel.session_output(graph.SerializeToString(), probe), probe, pooling)
        except Exception as exc:  # noqa: BLE001 - a graph onnxruntime cannot run is not used
            notes.append(f"{kind} graph does not run: {type(exc).__name__}: {exc}")
            continue
        cos, norm_error = agreement(got, want)
        if cos >= MIN_COSINE and norm_error <= MAX_NORM_ERROR:
            meta = {"format": FORMAT, "fingerprint": fingerprint, "pooling": pooling, "graph": kind, "fused": stats, "notes": notes,
                    "probe": {k: v.tolist() for k, v in probe.items()}, "expected": want.tolist()}  # fmt: skip
            graph.metadata_props.add(key=META_KEY, value=json.dumps(meta))
            from bench.runtime.writes import atomic_file

            with atomic_file(path, "the ONNX export", kept="the model runs with --backend torch meanwhile") as tmp:
                onnx.save_model(graph, str(tmp))
            return meta
        notes.append(f"{kind} graph disagrees with torch on the probe batch (min cosine {cos:.6f}, norm error {norm_error:.2e})")
    raise ModelLoadError(f"cannot export the model to ONNX for --backend onnx: {'; '.join(notes)}. Use --backend torch")


def probe_view(output: np.ndarray, batch: dict[str, np.ndarray], pooling: str) -> np.ndarray:
    """What the probe compares: pooled vectors as they are; token vectors (TOKENS) as their mean over real tokens
    (padding rows of a token output are not defined the same way by every attention implementation)."""
    if pooling != TOKENS:
        return output
    mask = np.asarray(batch["attention_mask"], dtype=np.float64)[..., None]
    return ((np.asarray(output, dtype=np.float64) * mask).sum(1) / np.maximum(mask.sum(1), 1e-9)).astype(np.float32)


def torch_pooled(model: Any, pooling: str, batch: dict[str, np.ndarray]) -> np.ndarray:
    """The torch model's pooled output on `batch`, as the torch backend computes it (float32, on the CPU); the
    last hidden states for TOKENS."""
    import torch

    device = next(model.parameters()).device
    with eval_mode(model), torch.inference_mode():
        tensors = {k: torch.from_numpy(v).to(device) for k, v in batch.items()}
        if pooling == TOKENS:
            return model(**tensors).last_hidden_state.float().cpu().numpy()
        return pooled_output(model, tensors, pooling).float().cpu().numpy()


def trace_graph(model: Any, pooling: str) -> Any:
    """The plain graph (an onnx ModelProto), traced with eager attention; the model's attention is restored."""
    import io

    import onnx
    import torch

    class Pooled(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            hidden = self.inner(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            return hidden if pooling == TOKENS else pool(hidden, attention_mask, pooling)

    was_training = model.training
    device = next(model.parameters()).device
    attention = getattr(model.config, "_attn_implementation", None)
    wrapper = Pooled(model).eval()  # eval on the wrapper: the exporter restores the wrapper's mode afterwards
    ids = torch.full((2, 8), 100, dtype=torch.long)
    mask = torch.ones((2, 8), dtype=torch.long)
    mask[1, 5:] = 0  # padding in the example: the traced graph keeps applying the mask
    buffer = io.BytesIO()
    try:
        if attention not in (None, "eager") and hasattr(model, "set_attn_implementation"):
            model.set_attn_implementation("eager")
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracer notes on shape checks that are constant for an encoder
            torch.onnx.export(
                wrapper.cpu(),
                (ids, mask),
                buffer,
                input_names=["input_ids", "attention_mask"],
                output_names=["pooled"],
                dynamic_axes={"input_ids": {0: "batch", 1: "length"}, "attention_mask": {0: "batch", 1: "length"},
                              "pooled": {0: "batch", 1: "length"} if pooling == TOKENS else {0: "batch"}},  # fmt: skip
                opset_version=OPSET,
                dynamo=False,
            )
    finally:
        if attention not in (None, "eager") and hasattr(model, "set_attn_implementation"):
            model.set_attn_implementation(attention)
        model.to(device).train(was_training)
    return onnx.load_from_string(buffer.getvalue())


def fuse_graph(graph: Any, config: Any) -> tuple[Any, dict[str, int]]:
    """ONNX Runtime's BERT fusions (fp32, opt_level 0: graph rewrites only) on a copy of `graph`, with the fused
    operator counts."""
    import onnx
    from onnxruntime.transformers.optimizer import optimize_model

    copy = onnx.ModelProto()
    copy.CopyFrom(graph)
    # the optimizer logs every fusion at INFO ("Fused Gelu: 2", a dozen lines): the stats below say it once
    quiet_before = logging.root.manager.disable
    logging.disable(max(quiet_before, logging.INFO))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            optimized = optimize_model(copy, model_type="bert", num_heads=int(config.num_attention_heads),
                                       hidden_size=int(config.hidden_size), opt_level=0)  # fmt: skip
    finally:
        logging.disable(quiet_before)
    stats = {k: int(v) for k, v in optimized.get_fused_operator_statistics().items() if v}
    return optimized.model, stats


def _threads() -> int:
    """ONNX Runtime ignores OMP_NUM_THREADS; honour it (0 = onnxruntime's default, one per physical core)."""
    try:
        return max(0, int(os.environ.get("OMP_NUM_THREADS", "0")))
    except ValueError:
        return 0


def _session(model: str | bytes) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = _threads()
    options.inter_op_num_threads = 1
    # No busy-waiting between ops: the encoder tokenises the next chunk on the same cores meanwhile, and spinning
    # threads took that time (a 32-wide BERT's batch cost twice the CPU with spinning on, on 2 shared cores).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3  # warnings about unused initialisers are noise here
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


class OnnxPooledModel:
    """An onnxruntime session over an exported pooled graph: `run(batch) -> (batch, dim) float32`."""

    def __init__(self, path: Path):
        self.path = path
        self.session = _session(str(path))
        self.inputs = {i.name for i in self.session.get_inputs()}
        self.meta = json.loads(self.session.get_modelmeta().custom_metadata_map.get(META_KEY, "{}"))

    @staticmethod
    def session_output(model: bytes, batch: dict[str, np.ndarray]) -> np.ndarray:
        session = _session(model)
        names = {i.name for i in session.get_inputs()}
        return np.asarray(session.run(None, {k: v for k, v in batch.items() if k in names})[0], dtype=np.float32)

    def check(self, fingerprint: str, pooling: str) -> str | None:
        """None when the file is a current-format export of these weights and pooling that still gives torch's answer
        on its probe, else why not."""
        if self.meta.get("format") != FORMAT or "probe" not in self.meta:
            return f"not a format-{FORMAT} export"
        if (self.meta.get("fingerprint"), self.meta.get("pooling")) != (fingerprint, pooling):
            return f"it was exported from other weights or pooling ({self.meta.get('fingerprint')}, {self.meta.get('pooling')})"
        probe = {k: np.asarray(v, dtype=np.int64) for k, v in self.meta["probe"].items()}
        got = probe_view(self.run(probe), probe, pooling)
        cos, norm_error = agreement(got, np.asarray(self.meta["expected"], dtype=np.float32))
        if cos < MIN_COSINE or norm_error > MAX_NORM_ERROR:
            return f"its output disagrees with the torch output stored at export (min cosine {cos:.6f})"
        return None

    @classmethod
    def for_encoder(cls, encoder: BackendHost, pooling: str | None = None) -> "OnnxPooledModel":
        """Load the encoder's exported graph (its pooling, or TOKENS); export it (from its torch model) when there is
        none, or when the file there is corrupt or fails its probe."""
        from bench.encode.backends.onnx_bound import BOUND_ENV, bound_bytes, keep_within_bound, mark_used
        from bench.runtime import progress

        say = progress.say if encoder.show_progress else (lambda _msg: None)
        pooling = pooling or str(encoder.options.pooling)
        fuse = fusion_asked(getattr(encoder, "dim", None), pooling)
        path = onnx_path(encoder.cache_dir, encoder.fingerprint, pooling, fuse)
        if path.is_file():
            try:
                loaded = cls(path)
                problem = loaded.check(encoder.fingerprint, pooling)
            except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own types for unreadable files
                problem = f"it cannot be loaded ({type(exc).__name__})"
            if problem is None:
                mark_used(path)
                return loaded
            warnings.warn(f"ONNX export {path} is not usable ({problem}); exporting it again", stacklevel=2)
            path.unlink(missing_ok=True)
        say(f"exporting {encoder.name} to ONNX once{' (token vectors)' if pooling == TOKENS else ''}: {path}")
        bound = bound_bytes()  # a bad $LENBENCH_ONNX_CACHE_GIB: refused before the export, not after
        export_pooled(encoder.model, pooling, path, encoder.fingerprint, fuse=fuse)
        removed = keep_within_bound(path.parent, keep=path, ours=is_lenbench_export, bound=bound)
        if removed:
            from bench.runtime.stores import human_size

            say(f"ONNX exports past the {human_size(bound)} bound (${BOUND_ENV}): removed the {len(removed)} "
                f"least recently used ({human_size(sum(size for _, size in removed))})")  # fmt: skip
        loaded = cls(path)
        problem = loaded.check(encoder.fingerprint, pooling)
        if problem is not None:
            raise ModelLoadError(f"the ONNX export {path} of {encoder.name!r} fails its check right after export "
                                 f"({problem}); use --backend torch")  # fmt: skip
        return loaded

    def run(self, batch: dict[str, np.ndarray]) -> np.ndarray:
        feeds = {k: np.ascontiguousarray(v, dtype=np.int64) for k, v in batch.items() if k in self.inputs}
        return np.asarray(self.session.run(None, feeds)[0], dtype=np.float32)


def is_lenbench_export(path: Path) -> bool:
    """Whether `path` is an export lenbench wrote: its name and the metadata key inside (read without onnx), or the
    temporary file of an export that was interrupted."""
    if TEMPORARY_NAME.fullmatch(path.name):
        return True
    if not FILE_NAME.fullmatch(path.name):
        return False
    try:
        with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return data.find(META_BYTES) >= 0
    except (OSError, ValueError):  # ValueError: an empty file cannot be mapped
        return False


# The ONNX exports as a store (`bench.runtime.stores`): the files of the onnx/ folder `is_lenbench_export` proves
# are lenbench's.
STORE = FolderStore("ONNX export(s)", FOLDER, is_lenbench_export, "not an export lenbench wrote", kind="onnx")
