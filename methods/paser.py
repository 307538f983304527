"""PaSeR (Wu & Zhao 2022, "Sentence Representation Learning with Generative Objective rather than Contrastive
Objective"; shared/papers/004): phrase reconstruction with a generative decoder, plus MLM.

Per text s (paper §3.1-3.2):
1. RAKE ranks the phrases of s (§3.1.1; `methods.rake`); the top-3 (Table 5 best) are masked, every token of a
   phrase replaced by [MASK], giving s~ (§3.1.2). Texts are first cut to the words whose tokens fit in max_len,
   so RAKE only sees what the encoder sees. Every occurrence of a chosen phrase is masked.
2. EDA synonym replacement on both s and s~ (§3.1.3, Table 4 best: SR alone), drawn independently; the masked
   words of s~ are never replaced. Synonyms: WordNet 3.0 (`methods.eda`). If no WordNet is installed the
   method warns once and runs without augmentation. The config resolves `synonyms_source` when it is made
   ("auto" -> "wordnet:<folder>" or "none"), so the run config `bench run` records says what ran.
3. One encoder (shared weights) embeds s and s~ with [CLS] pooling (App. B, Table 9 best).
4. Decoding signal (Eq. 2 / Eq. 6): [E_s, E_s~, m*|E_s - E_s~|, n*|E_s * E_s~|], m = n = 10 (App. A, Table 8).
   The paper writes the absolute value around the product too (SPEC §2 writes 10*(E_s*E_s~));
   `signal_product_abs` follows the paper by default. Default memory layout ("concat"): the concatenated 4H
   signal is projected by a linear layer to one H-wide memory vector (SBERT-style concatenation as in Eq. 2);
   "slots" feeds the four H-wide parts as 4 memory positions (what the reference implementation does).
5. A randomly initialised 6-layer transformer decoder (§4.2, §4.5.1; each layer drawn independently, widths
   and heads those of the encoder), whose input embeddings and output
   projection are the encoder's word-embedding matrix (same storage), generates the masked phrases with teacher
   forcing: target = the phrases' tokens in RAKE rank order, each followed by [SEP]; input = [CLS] + target
   shifted right. L_gen = token NLL (Eq. 3), averaged over target tokens.
6. L = L_MLM + L_gen (Eq. 4), L_MLM on s~'s masked phrase tokens through an MLM head (dense-GELU-LayerNorm, output
   tied to the word embeddings).

The decoder and MLM head are training-only modules returned by `setup`; the encoder that is saved has neither.
Not taken from the reference implementation: it skips the generative loss for inputs over 32 tokens; the
paper does not, so `skip_generative_over_tokens` defaults to None (recorded in the run config).
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from bench.encode.pooling import POOLINGS, pool
from methods import eda
from bench.train.hparams import hp
from bench.train.method import BaseAdapter, MethodSpec
from methods.losses import token_mean
from methods.mlm import MlmHead, SharedEmbedding
from methods.pairs import pad_rows
from methods.rake import rake, split_words

log = logging.getLogger(__name__)

MEMORY_LAYOUTS = ("concat", "slots")
SYNONYM_SOURCES = ("auto", "wordnet", "none")


@dataclass
class PaserConfig:
    top_k_phrases: int = hp(3, ge=1)  # §4.5.3, Table 5: RAKE top-3 is the best
    signal_diff_scale: float = 10.0  # m, App. A Table 8
    signal_product_scale: float = 10.0  # n, App. A Table 8
    signal_product_abs: bool = True  # Eq. 2 / Eq. 6 write n * |E_s * E_s~|
    memory_layout: str = hp("concat", choices=MEMORY_LAYOUTS)  # "concat": Linear(4H -> H), one memory vector; "slots": 4 memory vectors
    decoder_layers: int = hp(6, ge=1)  # §4.2 / §4.5.1: 6 layers is the best
    decoder_heads: int | None = hp(None, ge=1)  # None: the encoder's number of attention heads
    decoder_ffn: int | None = hp(None, ge=1)  # None: the encoder's intermediate size
    decoder_dropout: float = hp(0.1, ge=0, lt=1)
    max_target_len: int = hp(32, ge=2)  # decoder target tokens (phrases + separators); longer targets are cut
    pooling: str = hp("cls", choices=POOLINGS)  # App. B Table 9: [CLS] is the best
    synonym_rate: float = hp(0.1, ge=0, le=1)  # EDA alpha_sr (EDA's default; the paper gives no value)
    # "auto": WordNet if installed, else none (warned once); "wordnet": required; "none": no augmentation.
    # Resolved when the adapter is built to "wordnet:<folder>" or "none", so the run config records what ran.
    synonyms_source: str = "auto"
    mlm_weight: float = hp(1.0, ge=0)  # Eq. 4: L_MLM + L_generative, unweighted
    generative_weight: float = hp(1.0, ge=0)
    # The reference code skips L_gen for inputs over 32 tokens; the paper has no such rule: None = never skip.
    skip_generative_over_tokens: int | None = hp(None, ge=1)

    def __post_init__(self) -> None:
        if self.top_k_phrases < 1:
            raise ValueError(f"paser: top_k_phrases must be >= 1, got {self.top_k_phrases}")
        if self.memory_layout not in MEMORY_LAYOUTS:
            raise ValueError(f"paser: memory_layout {self.memory_layout!r} is not one of {MEMORY_LAYOUTS}")
        if self.pooling not in POOLINGS:
            raise ValueError(f"paser: pooling {self.pooling!r} is not one of {POOLINGS}")
        if self.decoder_layers < 1:
            raise ValueError(f"paser: decoder_layers must be >= 1, got {self.decoder_layers}")
        if self.max_target_len < 2:
            raise ValueError(f"paser: max_target_len must be >= 2, got {self.max_target_len}")
        if not 0.0 <= self.synonym_rate <= 1.0:
            raise ValueError(f"paser: synonym_rate must be in [0, 1], got {self.synonym_rate}")
        base = self.synonyms_source.split(":", 1)[0]
        if base not in SYNONYM_SOURCES:
            raise ValueError(f"paser: synonyms_source {self.synonyms_source!r}: use one of {SYNONYM_SOURCES}")
        # Resolved here, not when the adapter is built: `bench run` records asdict(config) (and hashes it) before
        # building the adapter, so the run config must already say what will run ("wordnet:<folder>" or "none").
        self.synonyms_source = resolve_synonyms_source(self.synonyms_source)


def decoding_signal(e_s: torch.Tensor, e_t: torch.Tensor, m: float, n: float, product_abs: bool = True) -> torch.Tensor:
    """Eq. 2: [E_s, E_s~, m*|E_s - E_s~|, n*|E_s * E_s~|] -> (batch, 4, hidden)."""
    prod = e_s * e_t
    return torch.stack([e_s, e_t, m * (e_s - e_t).abs(), n * (prod.abs() if product_abs else prod)], dim=1)


class PhraseDecoder(nn.Module):
    """Transformer decoder (randomly initialised) over the shared word embeddings, conditioned on the signal."""

    def __init__(
        self,
        shared: SharedEmbedding,
        hidden: int,
        heads: int,
        ffn: int,
        layers: int,
        max_target_len: int,
        dropout: float,
        memory_layout: str,
    ):
        super().__init__()
        self._shared = shared
        self.memory_layout = memory_layout
        self.positions = nn.Embedding(max_target_len, hidden)
        self.input_norm = nn.LayerNorm(hidden)
        self.memory_proj = nn.Linear(4 * hidden, hidden) if memory_layout == "concat" else nn.Linear(hidden, hidden)
        layer = nn.TransformerDecoderLayer(hidden, heads, ffn, dropout, activation="gelu", batch_first=True)
        self.layers = nn.TransformerDecoder(layer, layers)
        self.output_bias = nn.Parameter(torch.zeros(shared.weight.shape[0]))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Random initialisation (paper §4.2), each layer drawn independently: nn.TransformerDecoder deep-copies
        one layer, so without this all 6 would start identical. Matrices: Xavier-uniform, as nn.Transformer does;
        positions: N(0, 0.02), BERT's scale, so they do not drown the (small) shared word embeddings."""
        for p in self.layers.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        nn.init.normal_(self.positions.weight, std=0.02)

    @property
    def word_embedding_weight(self) -> torch.Tensor:
        return self._shared.weight

    def memory(self, signal: torch.Tensor) -> torch.Tensor:
        """(batch, 4, H) signal -> decoder memory: (batch, 1, H) for "concat", (batch, 4, H) for "slots"."""
        if self.memory_layout == "concat":
            return self.memory_proj(signal.flatten(1)).unsqueeze(1)
        return self.memory_proj(signal)

    def forward(self, signal: torch.Tensor, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Teacher-forced logits (batch, target_len, vocab)."""
        length = input_ids.shape[1]
        pos = torch.arange(length, device=input_ids.device)
        x = F.embedding(input_ids, self._shared.weight) + self.positions(pos)[None]
        x = self.input_norm(x)
        causal = torch.ones(length, length, dtype=torch.bool, device=x.device).triu(1)  # True: may not attend
        h = self.layers(
            x,
            self.memory(signal),
            tgt_mask=causal,
            tgt_key_padding_mask=attention_mask == 0,
        )
        return h @ self._shared.weight.T + self.output_bias


class PaserHeads(nn.Module):
    """The training-only modules, one container for the optimiser: phrase decoder + MLM head."""

    def __init__(self, decoder: PhraseDecoder, mlm_head: MlmHead):
        super().__init__()
        self.decoder = decoder
        self.mlm_head = mlm_head


WordNetMissingError = eda.WordNetMissingError  # synonyms_source asks for WordNet and there is none


_WARNED_NO_WORDNET: set[str] = set()


def resolve_synonyms_source(requested: str) -> str:
    """'auto' | 'wordnet[:folder]' | 'none' -> what will run: "wordnet:<folder>" or "none".

    'auto' without a WordNet database warns once per process (per folder) and gives "none"; an explicit
    'wordnet[:folder]' without one is an error."""
    kind, _, folder = requested.partition(":")
    if kind == "none":
        return "none"
    path = Path(folder) if folder else eda.wordnet_dir()
    if eda.wordnet_available(path):
        return f"wordnet:{path}"
    if kind == "wordnet":
        raise WordNetMissingError(
            f"paser: synonyms_source={requested!r} needs WordNet 3.0 and there is none in {path}: {eda.WORDNET_FIX}, "
            "or set paser.synonyms_source=none"
        )
    if str(path) not in _WARNED_NO_WORDNET:
        _WARNED_NO_WORDNET.add(str(path))
        log.warning(
            "paser: no WordNet database in %s (" + eda.WORDNET_FIX + "): training WITHOUT the EDA synonym "
            "replacement of the paper (synonyms_source recorded as 'none')",
            path,
        )
    return "none"


class PaserAdapter(BaseAdapter):
    name = "paser"

    def __init__(self, config: PaserConfig, *, tokenizer: Any, max_len: int, seed: int = 0):
        if not getattr(tokenizer, "is_fast", False):
            raise ValueError("paser needs a fast (Rust) tokenizer: masking maps words to tokens with word_ids()")
        if tokenizer.mask_token_id is None or tokenizer.cls_token_id is None or tokenizer.sep_token_id is None:
            raise ValueError("paser needs a tokenizer with [MASK], [CLS] and [SEP] tokens (a BERT-style vocabulary)")
        if max_len < 4:
            raise ValueError(f"paser: max_len must be at least 4, got {max_len}")
        self.config = config
        self.tokenizer = tokenizer
        self.max_len = max_len
        self.seed = seed
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        # The config resolved the source already ("wordnet:<folder>" or "none"): load what it names.
        kind, _, folder = config.synonyms_source.partition(":")
        self.wordnet = eda.load_wordnet(folder) if kind == "wordnet" else None
        self.heads: PaserHeads | None = None

    # ------------------------------------------------------------ batch building
    def _fit_words(self, words: list[str]) -> list[str]:
        """The longest prefix of `words` whose tokens fit in max_len with [CLS]/[SEP]."""
        if not words:
            return words
        word_ids = self.tokenizer(words, is_split_into_words=True, add_special_tokens=False).word_ids()
        budget = self.max_len - 2
        if len(word_ids) <= budget:
            return words
        cut = word_ids[budget]  # first word with a token past the budget: it and later words go
        return words[:cut]

    def _augment(self, words: list[str], rng: random.Random, protected: list[bool]) -> list[tuple[str, bool]]:
        """EDA synonym replacement; (word, is_protected) pairs. Protected words are never replaced."""
        if self.wordnet is None or self.config.synonym_rate <= 0:
            return list(zip(words, protected))
        out = eda.synonym_replacement(words, rng, self.wordnet, self.config.synonym_rate, [not p for p in protected])
        return [(tok, protected[src]) for tok, src, _ in out]

    def build_example(self, text: str, rng: random.Random) -> dict[str, Any] | None:
        """One text -> token ids of s, of s~ (with MLM labels) and the decoder target; None if no phrase."""
        words = self._fit_words(split_words(text))
        phrases = rake(words)[: self.config.top_k_phrases]
        if not phrases:
            return None
        masked = [False] * len(words)
        for ph in phrases:
            for s, e in ph.spans:  # every occurrence of a chosen phrase is masked
                for i in range(s, e):
                    masked[i] = True
        tok = self.tokenizer
        # Decoder target: the phrases' tokens in RAKE rank order, each closed by [SEP].
        target: list[int] = []
        for ph in phrases:
            s, e = ph.spans[0]
            target += tok(words[s:e], is_split_into_words=True, add_special_tokens=False)["input_ids"] + [tok.sep_token_id]
        target = target[: self.config.max_target_len]
        # s: synonym replacement everywhere; s~: synonym replacement on the unmasked words only (own draw).
        s_words = [w for w, _ in self._augment(words, rng, [False] * len(words))]
        t_pairs = self._augment(words, rng, masked)
        s_enc = tok(s_words, is_split_into_words=True, truncation=True, max_length=self.max_len)
        t_enc = tok([w for w, _ in t_pairs], is_split_into_words=True, truncation=True, max_length=self.max_len)
        t_ids = list(t_enc["input_ids"])
        labels = [-100] * len(t_ids)
        for pos, wid in enumerate(t_enc.word_ids()):
            if wid is not None and t_pairs[wid][1]:
                labels[pos] = t_ids[pos]
                t_ids[pos] = tok.mask_token_id
        return {
            "s_ids": list(s_enc["input_ids"]),
            "t_ids": t_ids,
            "mlm_labels": labels,
            "target": target,
            "words": words,
            "masked_words": masked,
        }

    def make_batch(self, texts: list[str], rng: random.Random) -> dict[str, Any] | None:
        examples = [ex for ex in (self.build_example(t, rng) for t in texts if t and t.strip()) if ex is not None]
        if not examples:
            return None
        s_ids, s_mask = pad_rows([e["s_ids"] for e in examples], self.pad_id)
        t_ids, t_mask = pad_rows([e["t_ids"] for e in examples], self.pad_id)
        mlm_labels, _ = pad_rows([e["mlm_labels"] for e in examples], -100)
        cls = self.tokenizer.cls_token_id
        dec_in, dec_mask = pad_rows([[cls] + e["target"][:-1] for e in examples], self.pad_id)
        dec_labels, _ = pad_rows([e["target"] for e in examples], -100)
        skip = self.config.skip_generative_over_tokens
        if skip is not None:  # reference-code rule, off by default (see module docstring)
            too_long = s_mask.sum(1) > skip
            dec_labels[too_long] = -100
        return {
            "s_input_ids": s_ids,
            "s_attention_mask": s_mask,
            "t_input_ids": t_ids,
            "t_attention_mask": t_mask,
            "mlm_labels": mlm_labels,
            "decoder_input_ids": dec_in,
            "decoder_attention_mask": dec_mask,
            "decoder_labels": dec_labels,
            "n_examples": len(examples),
            "n_tokens": int(s_mask.sum() + t_mask.sum()),
        }

    # ------------------------------------------------------------------ training
    def setup(self, model: torch.nn.Module) -> list[torch.nn.Module]:
        cfg = model.config
        hidden = int(cfg.hidden_size)
        heads = self.config.decoder_heads or int(getattr(cfg, "num_attention_heads", 8))
        ffn = self.config.decoder_ffn or int(getattr(cfg, "intermediate_size", 4 * hidden))
        if hidden % heads:
            raise ValueError(f"paser: decoder_heads={heads} does not divide the hidden size {hidden}")
        shared = SharedEmbedding(model.get_input_embeddings())
        eps = float(getattr(cfg, "layer_norm_eps", 1e-12))
        decoder = PhraseDecoder(
            shared, hidden, heads, ffn, self.config.decoder_layers, self.config.max_target_len,
            self.config.decoder_dropout, self.config.memory_layout,
        )
        self.heads = PaserHeads(decoder, MlmHead(shared, hidden, eps))
        device = next(model.parameters()).device
        self.heads.to(device)
        return [self.heads]

    def loss(self, model: torch.nn.Module, batch: dict[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        if self.heads is None:
            raise RuntimeError("paser: setup(model) must be called before training")
        device = next(model.parameters()).device
        b = {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in batch.items()}
        if next(self.heads.parameters()).device != device:
            self.heads.to(device)
        h_s = model(input_ids=b["s_input_ids"], attention_mask=b["s_attention_mask"]).last_hidden_state
        h_t = model(input_ids=b["t_input_ids"], attention_mask=b["t_attention_mask"]).last_hidden_state
        e_s = pool(h_s, b["s_attention_mask"], self.config.pooling)
        e_t = pool(h_t, b["t_attention_mask"], self.config.pooling)
        # MLM on s~'s masked phrase tokens (§3.2.4).
        labels = b["mlm_labels"]
        picked = labels != -100
        # Token means over every rank's tokens (token_mean): several processes train as one device.
        n_picked = int(picked.sum())
        if n_picked:
            mlm_logits = self.heads.mlm_head(h_t[picked])
            mlm = token_mean(F.cross_entropy(mlm_logits.float(), labels[picked], reduction="sum"), n_picked)
        else:
            mlm = token_mean(h_t.sum() * 0.0, 0)
        # Generative phrase reconstruction (§3.2.2-3.2.3).
        signal = decoding_signal(
            e_s, e_t, self.config.signal_diff_scale, self.config.signal_product_scale, self.config.signal_product_abs
        )
        logits = self.heads.decoder(signal, b["decoder_input_ids"], b["decoder_attention_mask"])
        dec_labels = b["decoder_labels"]
        n_targets = int((dec_labels != -100).sum())
        if n_targets:
            gen_sum = F.cross_entropy(logits.float().flatten(0, 1), dec_labels.flatten(), ignore_index=-100, reduction="sum")
            gen = token_mean(gen_sum, n_targets)
        else:
            gen = token_mean(logits.sum() * 0.0, 0)
        total = self.config.mlm_weight * mlm + self.config.generative_weight * gen
        return total, {"mlm_loss": float(mlm.detach()), "generative_loss": float(gen.detach())}

    # No state_dict: the decoder and MLM head are the modules setup() returned, and the shared trainer checkpoints
    # and restores those itself (with their optimiser moments). PaSeR keeps no other state between steps.


SPEC = MethodSpec(
    cite=("wu2022paser", "wei2019eda", "miller1995wordnet"),
    name="paser",
    paper="Wu & Zhao 2022, Sentence Representation Learning with Generative Objective rather than Contrastive "
    "Objective (PaSeR, EMNLP 2022)",
    summary="mask the top-3 RAKE phrases; a 6-layer decoder sharing the word embeddings reconstructs them from "
    "[E_s, E_s~, 10|E_s-E_s~|, 10|E_s*E_s~|] ([CLS]); loss = MLM + generative NLL; EDA synonym replacement",
    config_cls=PaserConfig,
    factory=PaserAdapter,
    needs_context=True,
)
