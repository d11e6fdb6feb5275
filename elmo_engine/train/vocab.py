"""The word vocabulary of the LM softmax: ``</S>``, ``<S>``, ``<UNK>``, then words by frequency.

The order and the file format (one token per line) are bilm-tf's ``vocab.txt``. Only the softmax
uses this vocabulary; the model's input is the characters of every token, rare ones included.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Dict, Iterable, List, Sequence

from elmo_engine.atomic import atomic_write_text
from elmo_engine.errors import InputError

EOS, BOS, UNK = "</S>", "<S>", "<UNK>"
SPECIALS = (EOS, BOS, UNK)
MIN_WORDS = 10  # fewer real words than this cannot train a language model

#: the largest vocabulary file read (64 MiB; a 10^6-word vocabulary is ~10 MB)
MAX_VOCAB_FILE_BYTES = 64 << 20


class Vocabulary:
    """Token ↔ id map. Ids 0, 1, 2 are ``</S>``, ``<S>``, ``<UNK>``; words follow by frequency."""

    def __init__(self, tokens: Sequence[str]):
        if tuple(tokens[:3]) != SPECIALS:
            raise ValueError("a vocabulary starts with </S>, <S>, <UNK>")
        self.tokens: List[str] = list(tokens)
        self.index: Dict[str, int] = {t: i for i, t in enumerate(self.tokens)}

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def unk(self) -> int:
        return 2

    def id(self, token: str) -> int:
        return self.index.get(token, 2)

    @classmethod
    def build(cls, counts: Counter, max_size: int, min_count: int, source=None) -> "Vocabulary":
        """The ``max_size`` most frequent tokens seen at least ``min_count`` times (ties by name).

        Raises :class:`InputError` naming ``source`` when fewer than ``MIN_WORDS`` words qualify.
        """
        words = [(c, t) for t, c in counts.items() if c >= min_count and t not in SPECIALS]
        words.sort(key=lambda ct: (-ct[0], ct[1]))
        words = words[: max(0, max_size - len(SPECIALS))]
        if len(words) < MIN_WORDS:
            raise InputError(f"vocabulary too small: {len(words)} word(s) occur at least "
                             f"{min_count} time(s) (need at least {MIN_WORDS}); use a larger "
                             "corpus or a lower --min-count", path=source)
        return cls(list(SPECIALS) + [t for _, t in words])

    def save(self, path) -> None:
        atomic_write_text(path, "\n".join(self.tokens) + "\n")

    @classmethod
    def load(cls, path) -> "Vocabulary":
        from elmo_engine.files import read_bounded, utf8_text

        path = Path(path)
        try:
            raw = read_bounded(path, MAX_VOCAB_FILE_BYTES)
        except OSError as e:
            raise InputError(f"cannot read vocabulary ({e.strerror or e})", path=path) from None
        except ValueError as e:
            raise InputError(f"vocabulary {e}", path=path) from None
        try:
            text = utf8_text(raw)
        except ValueError as e:
            raise InputError(f"vocabulary: {e}", path=path) from None
        tokens = text.split("\n")
        if tokens and tokens[-1] == "":
            tokens.pop()
        for i, t in enumerate(tokens):
            if not t or t != t.strip() or any(c.isspace() for c in t):
                raise InputError("a vocabulary line must hold one token without spaces",
                                 path=path, line=i + 1)
        if tuple(tokens[:3]) != SPECIALS:
            raise InputError("a vocabulary starts with the lines </S>, <S>, <UNK>", path=path,
                             line=1)
        if len(set(tokens)) != len(tokens):
            raise InputError("the vocabulary lists a token twice", path=path)
        return cls(tokens)

    def coverage(self, counts: Counter) -> float:
        """Fraction of the counted tokens that the vocabulary covers."""
        total = sum(counts.values())
        return sum(c for t, c in counts.items() if t in self.index) / max(total, 1)


def count_tokens(sentences: Iterable[Sequence[str]]) -> Counter:
    counts: Counter = Counter()
    for s in sentences:
        counts.update(s)
    return counts
