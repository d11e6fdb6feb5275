"""What a search of the corpus index finds (:class:`Hit`) and keyword in context: a token with
what surrounds it, cut to a width, as one line or three parts (the index's concordance,
``contexts`` and ``senses``, the Corpus and Characters views). Plain Python: the views import it
without the index's numpy and torch."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence, Tuple


def kwic(tokens: Sequence[str], position: int, width: int = 40) -> Tuple[str, str, str]:
    """Keyword in context: ``(left, word, right)`` of the token at ``position``, the left side
    cut from its start and the right side at its end to at most ``width`` characters each
    ("…" marks a cut); the word itself is never cut."""
    left = " ".join(tokens[:position])
    right = " ".join(tokens[position + 1:])
    if len(left) > width:
        left = "…" + left[-(width - 1):]
    if len(right) > width:
        right = right[:width - 1] + "…"
    return left, tokens[position], right


def kwic_line(tokens: Sequence[str], position: int, width: int = 40) -> str:
    """One keyword-in-context line, the word marked ``[word]`` and centred: the left side
    right-aligned in ``width`` characters, so that the marks of several lines stack (at most
    ``2 · width + len(word) + 4`` characters, whatever the sentence's length)."""
    left, word, right = kwic(tokens, position, width)
    return f"{left:>{width}} [{word}] {right}".rstrip()


@dataclass(frozen=True)
class Hit:
    """One occurrence found: where it is, the word, its cosine to the query, its sentence."""

    sentence_id: int
    position: int                     # 0-based token position in the sentence
    word: str
    cosine: float
    text: str                         # the sentence, tokens joined by spaces
    layer: int
    row: int                          # the token's row in the index's vector files

    def kwic(self, width: int = 40) -> Tuple[str, str, str]:
        """Keyword in context: ``(left, word, right)``, each side cut to ``width`` characters."""
        return kwic(self.text.split(" "), self.position, width)

    def to_dict(self) -> dict:
        return {"sentence_id": self.sentence_id, "position": self.position, "word": self.word,
                "cosine": self.cosine, "text": self.text, "layer": self.layer}


__all__ = ["Hit", "kwic", "kwic_line"]
