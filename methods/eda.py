"""EDA synonym replacement (Wei & Zou 2019, §2 "SR"), with synonyms from a local WordNet 3.0 database.

The synonyms come from the Princeton WordNet 3.0 dict files of Debian's `wordnet-base` package
(`apt-get install -y wordnet-base` -> /usr/share/wordnet; licence: WordNet 3.0, permissive), read directly here:
nltk's WordNetCorpusReader cannot be used on that folder (it also needs a `lexnames` file the package does not
ship, and nltk >= 3.9 refuses roots outside nltk.data.path). Lookup follows WordNet's morphy: exception lists,
then the standard detachment rules (e.g. "dogs" -> "dog"), as `wordnet.synsets(word)` does in the EDA code.
`LENBENCH_WORDNET` overrides the folder; without it, /usr/share/wordnet, else `<venv>/share/wordnet` (where
./setup.sh unpacks Debian's package when it cannot install it as root).
"""

from __future__ import annotations

import functools
import os
import random
import re
import sys
from pathlib import Path

from methods.rake import STOP_WORDS

DEFAULT_WORDNET_DIR = "/usr/share/wordnet"
_POS = ("noun", "verb", "adj", "adv")
# WordNet morphy detachment rules (wndb(5WN) / morph.c), per part of speech.
_MORPHY_RULES = {
    "noun": [("s", ""), ("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"), ("men", "man"), ("ies", "y")],
    "verb": [("s", ""), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""), ("ing", "e"), ("ing", "")],
    "adj": [("er", ""), ("est", ""), ("er", "e"), ("est", "e")],
    "adv": [],
}


# What a missing WordNet tells the user to do, in the one line a method that needs it stops with.
WORDNET_FIX = ("run ./setup.sh (it installs Debian's wordnet-base), or apt-get install -y wordnet-base, "
               "or set LENBENCH_WORDNET=<folder of WordNet 3.0 dict files>")  # fmt: skip


class WordNetMissingError(FileNotFoundError, ValueError):
    """A method needs WordNet and there is none (a ValueError too: `bench run` reports it as a bad setting, in one
    line, before anything trains)."""


def wordnet_dir() -> Path:
    """LENBENCH_WORDNET; else the first of /usr/share/wordnet and <venv>/share/wordnet that holds WordNet (the
    first when neither does)."""
    from bench import environment

    if given := environment.text("LENBENCH_WORDNET"):
        return Path(given)
    candidates = [Path(DEFAULT_WORDNET_DIR), Path(sys.prefix) / "share" / "wordnet"]
    return next((c for c in candidates if wordnet_available(c)), candidates[0])


def require_wordnet(method: str) -> Path:
    """The WordNet folder `method` will read, or WordNetMissingError naming the folder and the fix."""
    folder = wordnet_dir()
    if not wordnet_available(folder):
        raise WordNetMissingError(f"{method} needs WordNet 3.0 and there is none in {folder}: {WORDNET_FIX}")
    return folder


def wordnet_available(folder: Path | None = None) -> bool:
    folder = folder or wordnet_dir()
    return all((folder / f"{kind}.{pos}").is_file() for pos in _POS for kind in ("index", "data"))


class WordNet:
    """Synonym lookup over WordNet dict files (index.POS -> synset offsets -> data.POS lemma lists)."""

    def __init__(self, folder: str | os.PathLike[str]):
        self.folder = Path(folder)
        if not wordnet_available(self.folder):
            raise FileNotFoundError(
                f"no WordNet database in {self.folder} (needs index.* and data.* for noun/verb/adj/adv): {WORDNET_FIX}"
            )
        self._index: dict[str, dict[str, list[int]]] = {}
        self._exceptions: dict[str, dict[str, list[str]]] = {}
        self._data: dict[str, bytes] = {}
        for pos in _POS:
            idx: dict[str, list[int]] = {}
            with open(self.folder / f"index.{pos}", encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    if line.startswith(" "):  # licence header
                        continue
                    f = line.split()
                    n_synsets, n_pointers = int(f[2]), int(f[3])
                    offsets = f[4 + n_pointers + 2 :][:n_synsets]
                    idx[f[0]] = [int(o) for o in offsets]
            self._index[pos] = idx
            exc: dict[str, list[str]] = {}
            exc_file = self.folder / f"{pos}.exc"
            if exc_file.is_file():
                for line in exc_file.read_text(encoding="utf-8", errors="replace").splitlines():
                    f = line.split()
                    if len(f) >= 2:
                        exc[f[0]] = f[1:]
            self._exceptions[pos] = exc
            self._data[pos] = (self.folder / f"data.{pos}").read_bytes()

    def _lemmas_at(self, pos: str, offset: int) -> list[str]:
        data = self._data[pos]
        end = data.index(b"\n", offset)
        f = data[offset:end].decode("utf-8", errors="replace").split()
        n_words = int(f[3], 16)
        # Adjective lemmas may carry a syntactic marker such as "(a)" or "(ip)".
        return [re.sub(r"\([a-z]+\)$", "", f[4 + 2 * i]) for i in range(n_words)]

    def base_forms(self, word: str, pos: str) -> list[str]:
        """WordNet morphy: the word itself if indexed, its exception-list bases, else detachment-rule bases."""
        idx = self._index[pos]
        forms = [word] if word in idx else []
        forms += [b for b in self._exceptions[pos].get(word, []) if b in idx and b not in forms]
        if forms:
            return forms
        for suffix, ending in _MORPHY_RULES[pos]:
            if word.endswith(suffix) and len(word) > len(suffix):
                base = word[: len(word) - len(suffix)] + ending
                if base in idx and base not in forms:
                    forms.append(base)
        return forms

    @functools.lru_cache(maxsize=65536)
    def synonyms(self, word: str) -> tuple[str, ...]:
        """Sorted synonyms of `word` over all its synsets (EDA get_synonyms: '_'/'-' -> space, letters only)."""
        key = word.lower().replace(" ", "_")
        out: set[str] = set()
        bases: set[str] = set()
        for pos in _POS:
            for base in self.base_forms(key, pos):
                bases.add(base.replace("_", " "))
                for offset in self._index[pos][base]:
                    for lemma in self._lemmas_at(pos, offset):
                        syn = lemma.replace("_", " ").replace("-", " ").lower()
                        syn = "".join(c for c in syn if c == " " or "a" <= c <= "z").strip()
                        if syn:
                            out.add(syn)
        out -= bases | {word.lower()}  # "dogs" -> "dog" is not a synonym replacement
        return tuple(sorted(out))  # sorted: draws depend on the rng only, not on set order


@functools.lru_cache(maxsize=4)
def load_wordnet(folder: str) -> WordNet:
    return WordNet(folder)


def synonym_replacement(
    words: list[str],
    rng: random.Random,
    wordnet: WordNet,
    alpha: float = 0.1,
    replaceable: list[bool] | None = None,
) -> list[tuple[str, int, bool]]:
    """EDA SR: replace n = max(1, int(alpha * #words)) distinct non-stop words with a random synonym each.

    As in EDA, every occurrence of a chosen word is replaced, and words without synonyms are skipped. `words`
    are word/punctuation tokens; `replaceable[i]` False protects a position (PaSeR: the masked phrase words).
    Returns (token, index of the source word, replaced?) triples; a multi-word synonym gives several tokens.
    """
    replaceable = replaceable if replaceable is not None else [True] * len(words)
    if len(replaceable) != len(words):
        raise ValueError("synonym_replacement: replaceable must have one flag per word")
    n_words = sum(1 for w in words if re.search(r"[^\W\d_]", w))
    n_replace = max(1, int(alpha * n_words))
    candidates = sorted(
        {w.lower() for w, ok in zip(words, replaceable) if ok and w.isalpha() and w.lower() not in STOP_WORDS}
    )
    rng.shuffle(candidates)
    chosen: dict[str, str] = {}
    for cand in candidates:
        syns = wordnet.synonyms(cand)
        if syns:
            chosen[cand] = rng.choice(syns)
        if len(chosen) >= n_replace:
            break
    out: list[tuple[str, int, bool]] = []
    for i, (w, ok) in enumerate(zip(words, replaceable)):
        if ok and w.lower() in chosen:
            out.extend((piece, i, True) for piece in chosen[w.lower()].split())
        else:
            out.append((w, i, False))
    return out
