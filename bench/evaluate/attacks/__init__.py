"""Length attacks: perturbations of a dataset's texts that test how an embedder holds up when texts get longer.

An attack (`base.Attack`) belongs to a family (`base.AttackFamily`), which is a suite suffix: `sts@elong`,
`beir:scifact@elong,pad`. Families come from the `lenbench.attacks` entry-point group (`registry`); built in:
    elong    copy-and-concatenate within max_len (LA(SER)^3): elong-2, elong-4, elong-8, elong-rand  (`elong`)
    pad      distractor sentences at the start, middle or end: pad-start-2 ... pad-end-4             (`pad`)
    shuffle  the sentences in a random order: shuffle                                               (`shuffle`)
    len      the needle suite's context lengths (variant names only, not a suffix)                   (`length`)
Every attack has a token-aware form (never past max_len) and a word-level one for BM25. `lazy` applies one to a
dataset (whole, or chunk by chunk as a large corpus is read); `meter` measures what it changed.

A new attack: a module defining an `AttackFamily` (see `shuffle.py`, the smallest) and one entry point in the
`lenbench.attacks` group of its package's pyproject.toml.
"""

from bench.evaluate.attacks.base import (
    ATTACK_CHUNK, CLEAN, SPECIAL_TOKENS_BERT, Attack, AttackFamily, AttackInput, Distractors, split_sentences,
)  # fmt: skip
from bench.evaluate.attacks.elong import (
    Attacked, attack_batch, attack_texts, count_tokens, elongate, elongate_random, elongate_within, elongate_words,
    max_m, parse_elong_variants, sample_m, shuffle_words, truncate_to_tokens,
)  # fmt: skip
from bench.evaluate.attacks.lazy import AttackedTexts, apply_attack
from bench.evaluate.attacks.meter import AttackEffect, AttackMeter, attack_effect, input_keys, model_input_ids
from bench.evaluate.attacks.registry import (
    ENTRY_POINT_GROUP, VariantInfo, attacks_for, describe_variant, families, family_ordered, get_family, order_variants,
    parse_attack_options, register,
)  # fmt: skip

__all__ = [
    "ATTACK_CHUNK", "CLEAN", "ENTRY_POINT_GROUP", "SPECIAL_TOKENS_BERT", "Attack", "AttackEffect", "AttackFamily",
    "AttackInput", "AttackMeter", "Attacked", "AttackedTexts", "Distractors", "VariantInfo", "apply_attack",
    "attack_batch", "attack_effect", "attack_texts", "attacks_for", "count_tokens", "describe_variant", "elongate",
    "elongate_random", "elongate_within", "elongate_words", "families", "family_ordered", "get_family", "input_keys", "max_m",
    "model_input_ids", "order_variants", "parse_attack_options", "parse_elong_variants", "register", "sample_m",
    "shuffle_words", "split_sentences", "truncate_to_tokens",
]  # fmt: skip
