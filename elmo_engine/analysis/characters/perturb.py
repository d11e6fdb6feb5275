"""Perturbation sweeps in context: a word in its sentence, perturbed, and how far each layer's
vector moves.

The variants of a word (:func:`variants`, deterministic for a seed): deletions, insertions,
substitutions and transpositions of adjacent letters with 1 and 2 edits, case changes, an affix
added or removed, a letter repeated. Each variant replaces the word in the sentence; the cosine
of its vector to the original's is taken per layer (0: the token layer; 1 … L: each biLSTM
layer, whole and per direction, forward = the first half, backward = the second), and averaged
per perturbation type (:func:`summarise`). Where layer 1–2 stays closer than layer 0, the
context repairs the typo.
"""
from __future__ import annotations

import string
from dataclasses import dataclass
from enum import Enum
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from elmo_engine.errors import InputError
from elmo_engine.progress import TaskState, check, report


class Kind(str, Enum):
    """The perturbation types, in the order they are shown."""

    DELETE_1 = "delete 1"
    DELETE_2 = "delete 2"
    INSERT_1 = "insert 1"
    INSERT_2 = "insert 2"
    SUBSTITUTE_1 = "substitute 1"
    SUBSTITUTE_2 = "substitute 2"
    TRANSPOSE_1 = "transpose 1"
    TRANSPOSE_2 = "transpose 2"
    CASE = "case"
    AFFIX_ADDED = "affix added"
    AFFIX_REMOVED = "affix removed"
    REPEAT = "letter repeated"


PREFIXES = ("un", "re", "non", "pre", "dis", "over", "anti")
SUFFIXES = ("s", "es", "ed", "ing", "er", "ly", "ness", "ment", "less", "ful", "able", "ish")
LETTERS = string.ascii_lowercase
#: the directions of a layer's vector (layer 0's halves are equal: "both" only)
DIRECTIONS = ("both", "forward", "backward")


@dataclass(frozen=True)
class Variant:
    kind: Kind
    text: str


#: variants per type by default: the view, the report and ``chars perturb`` alike
PER_KIND = 4

def _edit(word: str, rng: np.random.Generator, op: str) -> str:
    n = len(word)
    if op == "delete":
        if n < 2:
            return word
        i = int(rng.integers(n))
        return word[:i] + word[i + 1:]
    if op == "insert":
        i = int(rng.integers(n + 1))
        return word[:i] + LETTERS[int(rng.integers(26))] + word[i:]
    if op == "substitute":
        i = int(rng.integers(n))
        c = LETTERS[int(rng.integers(26))]
        return word[:i] + (c.upper() if word[i].isupper() else c) + word[i + 1:]
    if n < 2:                                        # transpose two adjacent characters
        return word
    i = int(rng.integers(n - 1))
    return word[:i] + word[i + 1] + word[i] + word[i + 2:]


def variants(word: str, per_kind: int = PER_KIND, seed: int = 0) -> List[Variant]:
    """Up to ``per_kind`` distinct variants of ``word`` per :class:`Kind` (none equal to the
    word); the same list for the same word, ``per_kind`` and ``seed``."""
    if not word or any(c.isspace() for c in word):
        raise InputError(f"not a word: {word!r} (one token, no spaces)")
    if per_kind < 1:
        raise InputError("at least one variant per type")
    rng = np.random.default_rng([seed, *word.encode("utf-8")])
    out: List[Variant] = []

    def add(kind: Kind, cands) -> None:
        seen = {word}
        for c in cands:
            if c not in seen and c and len([v for v in out if v.kind == kind]) < per_kind:
                seen.add(c)
                out.append(Variant(kind, c))

    for op, k1, k2 in (("delete", Kind.DELETE_1, Kind.DELETE_2),
                       ("insert", Kind.INSERT_1, Kind.INSERT_2),
                       ("substitute", Kind.SUBSTITUTE_1, Kind.SUBSTITUTE_2),
                       ("transpose", Kind.TRANSPOSE_1, Kind.TRANSPOSE_2)):
        add(k1, (_edit(word, rng, op) for _ in range(8 * per_kind)))
        add(k2, (_edit(_edit(word, rng, op), rng, op) for _ in range(8 * per_kind)))
    add(Kind.CASE, [word.lower(), word.upper(), word.capitalize(), word.swapcase(),
                    "".join(c.upper() if i % 2 else c.lower() for i, c in enumerate(word))])
    low = word.lower()
    add(Kind.AFFIX_ADDED, [a for pre, suf in zip(PREFIXES, SUFFIXES)
                            for a in (word + suf, pre + word)])
    removed = [word[len(p):] for p in PREFIXES if low.startswith(p) and len(word) > len(p) + 2]
    removed += [word[:-len(s)] for s in SUFFIXES if low.endswith(s) and len(word) > len(s) + 2]
    add(Kind.AFFIX_REMOVED, removed)
    letters = [i for i, c in enumerate(word) if c.isalpha()] or list(range(len(word)))
    add(Kind.REPEAT, [word[:i + 1] + word[i] * r + word[i + 1:]
                      for r in (1, 2) for i in rng.permutation(letters).tolist()])
    return out


@dataclass(frozen=True)
class Sweep:
    """Cosines of each variant's vectors to the original's, in one or more sentences.

    ``cosines`` (V, S, L+1, 3): variant × sentence × layer × direction (both, forward,
    backward); layer 0's forward and backward are its whole vector's (the halves are equal).
    """

    word: str
    variants: Tuple[Variant, ...]
    sentences: Tuple[Tuple[str, ...], ...]
    positions: Tuple[int, ...]
    cosines: np.ndarray

    def summary(self) -> Dict[Kind, np.ndarray]:
        """The mean cosine per perturbation type: (L+1, 3) per kind present."""
        return summarise([self])

    def to_dict(self) -> dict:
        layers = self.cosines.shape[2]
        per = self.cosines.mean(1)                                   # (V, L+1, 3)
        return {"word": self.word, "sentences": [" ".join(s) for s in self.sentences],
                "positions": list(self.positions),
                "layers": list(range(layers)), "directions": list(DIRECTIONS),
                "variants": [{"type": v.kind.value, "text": v.text,
                              "cosine": _rounded(per[i])} for i, v in enumerate(self.variants)],
                "mean_per_type": {k.value: _rounded(m) for k, m in self.summary().items()}}


def _rounded(m: np.ndarray) -> List[List[float]]:
    return [[round(float(x), 5) for x in row] for row in m]


def summarise(sweeps: Sequence[Sweep]) -> Dict[Kind, np.ndarray]:
    """Mean cosine per type over every variant and sentence of ``sweeps``: (L+1, 3) per kind."""
    acc: Dict[Kind, List[np.ndarray]] = {}
    for s in sweeps:
        for i, v in enumerate(s.variants):
            acc.setdefault(v.kind, []).append(s.cosines[i].reshape(-1, *s.cosines.shape[2:]))
    return {k: np.concatenate(acc[k]).mean(0) for k in Kind if k in acc}


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine of (…, d) arrays."""
    num = (a * b).sum(-1)
    den = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)
    return num / np.maximum(den, 1e-12)


def find(tokens: Sequence[str], word: str, occurrence: int = 1) -> int:
    """The position of the ``occurrence``-th ``word`` in ``tokens`` (exact match)."""
    hits = [i for i, t in enumerate(tokens) if t == word]
    if len(hits) < occurrence:
        raise InputError(f"'{word}' occurs {len(hits)} time(s) in the sentence "
                         f"({' '.join(tokens)}); occurrence {occurrence} asked for")
    return hits[occurrence - 1]


def sweep(embedder, sentences: Sequence[Sequence[str]], word: str, per_kind: int = PER_KIND,
          seed: int = 0, state: Optional[TaskState] = None) -> Sweep:
    """Perturb ``word`` (its first occurrence) in each of ``sentences`` (tokenized) and
    measure each variant's cosine to the original per layer and direction."""
    sents = [tuple(s) for s in sentences]
    if not sents:
        raise InputError(f"no sentence holds '{word}'")
    positions = [find(s, word) for s in sents]
    vs = variants(word, per_kind, seed)
    n_layers = embedder.opts.n_output_layers
    half = embedder.opts.output_dim
    cos = np.zeros((len(vs), len(sents), n_layers, 3), np.float32)
    for j, (s, p) in enumerate(zip(sents, positions)):
        check(state)
        report(state, j, len(sents), f"perturbing '{word}' in sentence {j + 1}")
        batch = [s] + [s[:p] + (v.text,) + s[p + 1:] for v in vs]
        arrays = embedder.embed(batch, state=state)                   # (L+1, n, 2P) each
        ref = arrays[0][:, p]                                         # (L+1, 2P)
        alt = np.stack([a[:, p] for a in arrays[1:]])                 # (V, L+1, 2P)
        cos[:, j, :, 0] = _cos(alt, ref[None])
        cos[:, j, :, 1] = _cos(alt[..., :half], ref[None, :, :half])
        cos[:, j, :, 2] = _cos(alt[..., half:], ref[None, :, half:])
    report(state, len(sents), len(sents), "perturbations done")
    return Sweep(word, tuple(vs), tuple(sents), tuple(positions), cos)


def sweep_corpus(embedder, sentences: Sequence[Sequence[str]], words: Sequence[str],
                 per_word: int = 20, per_kind: int = PER_KIND, seed: int = 0,
                 state: Optional[TaskState] = None) -> List[Sweep]:
    """:func:`sweep` for each word of ``words`` over (up to ``per_word`` of) the sentences that
    hold it, in corpus order; words that no sentence holds are left out."""
    out = []
    for i, w in enumerate(words):
        check(state)
        report(state, i, len(words), f"'{w}'")
        holding = [s for s in sentences if w in s][:per_word]
        if holding:
            out.append(sweep(embedder, holding, w, per_kind, seed, state))
    report(state, len(words), len(words), "done")
    return out
