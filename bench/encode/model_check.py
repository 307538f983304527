"""Is a model folder usable? Checked from its files, before a run row is written, without loading torch.

A folder transformers would load "successfully" can still score garbage: without tokenizer files transformers
builds a 5-token tokenizer and every word becomes [UNK]; a config whose sizes differ from the weights gets freshly
initialised (random) layers in place of the stored ones; a vocabulary larger than the embedding matrix indexes past
it. `check_model_folder` refuses each with one line naming the folder and what to do:

- config.json: a JSON object;
- tokenizer: some tokenizer file is present (tokenizer.json, vocab.txt, vocab.json + merges.txt, a SentencePiece
  model) and its vocabulary parses and has at least MIN_VOCAB entries, no more than config's vocab_size;
- weights: every safetensors file is complete (header parses, data as long as it says), and the shapes agree with
  the config (embedding matrix = vocab_size x hidden size, number of layers).

`check_tokenizer` is the same promise for a loaded tokenizer (the round trip: a plain sentence must not come back
as unknown tokens only), and `check_loading_info` for weights transformers loaded (no parameter left random).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from bench.runtime.errors import ModelLoadError

MIN_VOCAB = 100  # real vocabularies have thousands of entries; transformers' fallback tokenizer has 5
PROBE = "The quick brown fox jumps over the lazy dog, 42 times."
SENTENCEPIECE = ("spiece.model", "sentencepiece.bpe.model", "tokenizer.model", "sentencepiece.model")
HIDDEN_KEYS = ("hidden_size", "d_model", "dim", "n_embd")
LAYER_KEYS = ("num_hidden_layers", "n_layers", "num_layers", "n_layer")
EMBEDDING_NAMES = ("word_embeddings.weight", "embed_tokens.weight", "shared.weight", "wte.weight", "word_embedding.weight")
LAYER_INDEX = re.compile(r"(?:^|\.)(?:layer|layers|h|block)\.(\d+)\.")
# Parameters a model may leave to their initialisation without changing its embeddings (the pooler head of
# BERT-like models, which mean / CLS pooling of last_hidden_state never uses).
HARMLESS_MISSING = re.compile(r"(^|\.)pooler\.")


def _fail(name: str, folder: Path, what: str, todo: str) -> ModelLoadError:
    return ModelLoadError(f"model {name!r} ({folder}): {what}; {todo}")


def read_config(name: str, folder: Path) -> dict[str, Any]:
    path = folder / "config.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise _fail(name, folder, f"config.json cannot be read as JSON ({' '.join(str(exc).split())})",
                    "save the model again (save_pretrained)") from None  # fmt: skip
    if not isinstance(data, dict):
        raise _fail(name, folder, f"config.json holds a JSON {type(data).__name__}, not an object", "save the model again")
    return data


def _int(config: dict[str, Any], keys: tuple[str, ...]) -> int | None:
    for key in keys:
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def vocabulary_size(name: str, folder: Path) -> int:
    """Entries of the folder's tokenizer vocabulary; refuses a folder with none, or one that does not parse."""
    tok_json = folder / "tokenizer.json"
    if tok_json.is_file():
        try:
            data = json.loads(tok_json.read_text(encoding="utf-8"))
            vocab = data["model"]["vocab"]
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
            raise _fail(name, folder, f"tokenizer.json is not a tokenizer ({type(exc).__name__}: {' '.join(str(exc).split())[:120]})",
                        "save the tokenizer again (tokenizer.save_pretrained)") from None  # fmt: skip
        if not isinstance(vocab, (dict, list)):
            raise _fail(name, folder, "tokenizer.json has no vocabulary list", "save the tokenizer again (tokenizer.save_pretrained)")
        if len(vocab) >= MIN_VOCAB:
            _round_trip(name, folder, tok_json, data["model"].get("unk_token"))
        return len(vocab)
    vocab_txt = folder / "vocab.txt"
    if vocab_txt.is_file():
        try:
            lines = vocab_txt.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise _fail(name, folder, f"vocab.txt is not UTF-8 text ({exc})", "save the tokenizer again") from None
        return len({line for line in lines if line.strip()})
    vocab_json = folder / "vocab.json"
    if vocab_json.is_file():
        try:
            vocab = json.loads(vocab_json.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise _fail(name, folder, f"vocab.json cannot be read ({' '.join(str(exc).split())})", "save the tokenizer again") from None
        return len(vocab) if isinstance(vocab, dict) else 0
    for piece in SENTENCEPIECE:
        if (folder / piece).is_file():
            return -1  # a SentencePiece model: its size is known once loaded (check_tokenizer)
    raise _fail(name, folder, "it has no tokenizer files (tokenizer.json, vocab.txt, vocab.json or a SentencePiece model); "
                "transformers would build a 5-token tokenizer that reads every word as [UNK]",
                "save the tokenizer beside the weights (tokenizer.save_pretrained(folder))")  # fmt: skip


def _round_trip(name: str, folder: Path, path: Path, unk_token: Any) -> None:
    """The `tokenizers` library (fast, no torch) reads a plain sentence with the folder's tokenizer.json: it must
    give tokens other than the unknown one."""
    try:
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(path))
        tokenizer.no_padding()  # a saved padding / truncation setting would add pad ids to the probe
        tokenizer.no_truncation()
        ids = tokenizer.encode(PROBE, add_special_tokens=False).ids
    except ImportError:
        return  # checked once transformers loads it (check_tokenizer)
    except Exception as exc:  # noqa: BLE001 - the tokenizers library raises its own exception types
        raise _fail(name, folder, f"tokenizer.json cannot be loaded ({type(exc).__name__}: {' '.join(str(exc).split())[:160]})",
                    "save the tokenizer again (tokenizer.save_pretrained)") from None  # fmt: skip
    unk = tokenizer.token_to_id(unk_token) if isinstance(unk_token, str) else None
    if not ids or (unk is not None and all(i == unk for i in ids)):
        raise _fail(name, folder, f"its tokenizer reads a plain sentence as {len(ids)} unknown token(s)",
                    "save the model's real tokenizer beside it")  # fmt: skip


def safetensors_shapes(name: str, folder: Path) -> dict[str, list[int]]:
    """Tensor name -> shape over every *.safetensors file; refuses a truncated or corrupt file."""
    shapes: dict[str, list[int]] = {}
    for path in sorted(folder.glob("*.safetensors")):
        try:
            with open(path, "rb") as fh:
                size = int.from_bytes(fh.read(8), "little")
                if size > 100_000_000:
                    raise ValueError(f"header size {size}")
                header = json.loads(fh.read(size))
            tensors = {k: t for k, t in header.items() if k != "__metadata__"}
            end = max((int(t["data_offsets"][1]) for t in tensors.values()), default=0)
            ok = path.stat().st_size >= 8 + size + end and all(
                isinstance(t["shape"], list) and all(isinstance(d, int) and d >= 0 for d in t["shape"]) for t in tensors.values()
            )
        except (OSError, ValueError, KeyError, TypeError, IndexError, MemoryError, AttributeError):
            ok = False
        if not ok:
            raise ModelLoadError(f"cannot load model {name!r}: {path} is not a complete safetensors file (truncated or "
                                 "corrupt); save the model again")  # fmt: skip
        shapes.update({k: t["shape"] for k, t in tensors.items()})
    return shapes


def check_model_folder(name: str, folder: str | Path) -> None:
    """Refuse, with one line, a model folder that would load but score garbage (see the module docstring)."""
    folder = Path(folder)
    config = read_config(name, folder)
    vocab = vocabulary_size(name, folder)
    config_vocab = _int(config, ("vocab_size",))
    if 0 <= vocab < MIN_VOCAB:
        raise _fail(name, folder, f"its tokenizer vocabulary has only {vocab} entries", "save the model's real tokenizer beside it")
    if config_vocab is not None and vocab > config_vocab:
        raise _fail(name, folder, f"its tokenizer has {vocab} entries but config.json's vocab_size is {config_vocab} "
                    "(token ids would index past the embedding matrix)", "pair the weights with their own tokenizer")  # fmt: skip
    shapes = safetensors_shapes(name, folder)
    if not shapes:
        return  # pickle weights: checked as transformers loads them (check_loading_info)
    hidden = _int(config, HIDDEN_KEYS)
    embedding = next((shape for key, shape in shapes.items() if key.endswith(EMBEDDING_NAMES) and len(shape) == 2), None)
    if embedding is not None:
        if config_vocab is not None and embedding[0] != config_vocab:
            raise _fail(name, folder, f"config.json says vocab_size {config_vocab} but the weights' embedding matrix has "
                        f"{embedding[0]} rows", "use the config.json saved with these weights")  # fmt: skip
        if hidden is not None and embedding[1] != hidden:
            raise _fail(name, folder, f"config.json says hidden size {hidden} but the weights are {embedding[1]} wide",
                        "use the config.json saved with these weights")  # fmt: skip
    layers = _int(config, LAYER_KEYS)
    found = {int(m.group(1)) for key in shapes for m in [LAYER_INDEX.search(key)] if m}
    if layers is not None and found and len(found) != layers and max(found) + 1 != layers:
        raise _fail(name, folder, f"config.json says {layers} layers but the weights hold {max(found) + 1}",
                    "use the config.json saved with these weights")  # fmt: skip


def check_tokenizer(name: str, source: str, tokenizer: Any) -> None:
    """A loaded tokenizer must have a real vocabulary and read a plain sentence as more than unknown tokens."""
    try:
        size = len(tokenizer)
        ids = tokenizer(PROBE, add_special_tokens=False)["input_ids"]
    except Exception as exc:  # noqa: BLE001 - any failure of a third-party tokenizer on a plain sentence
        raise ModelLoadError(f"model {name!r} ({source}): its tokenizer fails on a plain sentence ({type(exc).__name__}: "
                             f"{' '.join(str(exc).split())[:160]}); save the tokenizer again") from None  # fmt: skip
    unk = getattr(tokenizer, "unk_token_id", None)
    if size < MIN_VOCAB or not ids or (unk is not None and all(i == unk for i in ids)):
        raise ModelLoadError(f"model {name!r} ({source}): its tokenizer ({size} entries) reads a plain sentence as "
                             f"{len(ids)} unknown token(s); save the model's real tokenizer beside it")  # fmt: skip


def check_loading_info(name: str, source: str, info: dict[str, Any]) -> None:
    """No parameter that shapes the embeddings may be left at its random initialisation."""
    missing = sorted(k for k in info.get("missing_keys") or () if not HARMLESS_MISSING.search(k))
    mismatched = list(info.get("mismatched_keys") or ())
    if missing or mismatched:
        what = (f"{len(missing)} parameter(s) missing from its weights (e.g. {missing[0]})" if missing
                else f"{len(mismatched)} weight(s) of another shape than config.json says (e.g. {mismatched[0][0]})")  # fmt: skip
        raise ModelLoadError(f"model {name!r} ({source}): {what}, so they would be random; use the config.json and "
                             "weights saved together")  # fmt: skip


# Position tables of these model types start after the padding index (RoBERTa's 514 rows hold 512 positions).
OFFSET_POSITIONS = {"roberta": 2, "xlm-roberta": 2, "xlm-roberta-xl": 2, "camembert": 2, "mpnet": 2, "longformer": 2}


def positions_limit(config: dict[str, Any]) -> int | None:
    """The most tokens a model reads (its position table), None when it has no such limit or does not say."""
    n = _int(config, ("max_position_embeddings", "n_positions", "max_seq_len"))
    if n is None or n <= 0:
        return None
    return n - OFFSET_POSITIONS.get(str(config.get("model_type", "")), 0)


def check_max_len(name: str, config: dict[str, Any], max_len: int, option: str = "--max-len") -> None:
    """A max_len beyond the model's positions fails mid-run (an elongated text reaches it): refused up front."""
    limit = positions_limit(config)
    if limit is not None and max_len > limit:
        from bench.runtime.errors import ConfigError

        raise ConfigError(f"{option} {max_len}: model {name!r} reads at most {limit} tokens (its position table); "
                          f"give {option} {limit} or less")  # fmt: skip
