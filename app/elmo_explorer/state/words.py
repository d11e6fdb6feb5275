"""The word the app starts on when the user has chosen none (plain Python; the workspace selects
its first occurrence, and the Contexts and Projection views start on it)."""
from __future__ import annotations

from collections import Counter
from typing import List

DEFAULT_WORD = "bank"


def default_word(tokens: List[List[str]]) -> str:
    """"bank" when present, else the most frequent word of 4+ letters seen twice, else ""."""
    counts = Counter(t for s in tokens for t in s)
    if counts.get(DEFAULT_WORD):
        return DEFAULT_WORD
    for word, n in counts.most_common():
        if n >= 2 and len(word) >= 4 and word.isalpha():
            return word
    return next(iter(counts), "")
