"""Group labels of a word's occurrences from labelled sentences (``group<TAB>sentence`` files).

A sentence's group names the sense of a word in it. ``"bank: river"`` labels the occurrences of
*bank* (compared without regard to case) in that sentence ``river`` and nothing else; a group
without ``"word: "`` in front (``"river"``) labels every word of the sentence. Occurrences in
sentences without a group get none. The contexts view, ``elmo-explorer contexts`` and reports
use this one rule.
"""
from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

Occ = Tuple[int, int]


def split_group(group: str) -> Tuple[Optional[str], str]:
    """``"bank: river"`` → ``("bank", "river")``; ``"river"`` → ``(None, "river")``."""
    word, colon, sense = group.partition(":")
    if colon and word.strip() and " " not in word.strip() and sense.strip():
        return word.strip(), sense.strip()
    return None, group.strip()


def word_groups(word: str, tokens: Sequence[Sequence[str]],
                sentence_groups: Sequence[str]) -> Dict[Occ, str]:
    """``{(sentence, token): sense}`` for the occurrences of ``word`` (any case) in sentences
    whose group applies to it; ``sentence_groups`` holds one group per sentence (``""``: none)."""
    out: Dict[Occ, str] = {}
    target = word.casefold()
    for s, (toks, group) in enumerate(zip(tokens, sentence_groups)):
        if not group:
            continue
        for_word, sense = split_group(group)
        if for_word is not None and for_word.casefold() != target:
            continue
        for t, tok in enumerate(toks):
            if tok.casefold() == target:
                out[(s, t)] = sense
    return out


__all__ = ["split_group", "word_groups"]
