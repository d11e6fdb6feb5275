"""Sentences read a batch at a time: what the scans over a corpus read (``units top`` and
``units pattern``: a file's sentences held, or a corpus index's read from its token table,
:func:`elmo_engine.index.search.open_sentences`). :class:`Batches` is the one rule for the
batches and for a cut at ``max_tokens`` words, the same as
:func:`~elmo_engine.analysis.units.corpus.read_units_corpus`'s: whole sentences while fewer
words than that have been read.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, List, Optional, Sequence, Tuple

from elmo_engine.errors import InputError


@dataclass(frozen=True)
class SentenceSource:
    """Sentences read a batch at a time: ``read(start, count)`` gives sentences ``start`` …
    ``start + count - 1`` of the ``n_sentences`` (``n_tokens`` words in all, for progress)."""

    read: Callable[[int, int], List[List[str]]]
    n_sentences: int
    n_tokens: int

    @classmethod
    def of(cls, sentences: Sequence[Sequence[str]]) -> "SentenceSource":
        """Sentences held in memory (a file read by
        :func:`~elmo_engine.analysis.units.corpus.read_units_corpus`)."""
        return cls(lambda a, n: [list(x) for x in sentences[a:a + n]], len(sentences),
                   sum(len(x) for x in sentences))

    def batches(self, size: int, max_tokens: Optional[int] = None) -> "Batches":
        return Batches(self, size, max_tokens)


class Batches:
    """``(first sentence number, sentences)`` in order, ``size`` at a time; with ``max_tokens``
    whole sentences while fewer words than that have been read (as
    :func:`~elmo_engine.analysis.units.corpus.read_units_corpus` cuts a file). Once iterated:
    ``sentences`` and ``tokens`` read, ``truncated`` whether the source holds more; ``total`` is
    the words the progress counts to."""

    def __init__(self, source: SentenceSource, size: int, max_tokens: Optional[int]):
        self.source, self.size, self.max_tokens = source, int(size), max_tokens
        self.total = source.n_tokens if max_tokens is None else min(source.n_tokens,
                                                                     int(max_tokens))
        self.sentences = self.tokens = 0
        self.truncated = False

    def __iter__(self) -> Iterator[Tuple[int, List[List[str]]]]:
        src = self.source
        while self.sentences < src.n_sentences and not self.truncated:
            chunk = src.read(self.sentences, min(self.size, src.n_sentences - self.sentences))
            if not chunk:
                raise InputError(f"sentence {self.sentences} could not be read (the corpus says "
                                 f"it holds {src.n_sentences:,})")
            kept = []
            for sent in chunk:
                if self.max_tokens is not None and self.tokens >= self.max_tokens:
                    self.truncated = True
                    break
                kept.append(sent)
                self.tokens += len(sent)
            if kept:
                yield self.sentences, kept
                self.sentences += len(kept)
        self.truncated = self.truncated or self.sentences < src.n_sentences
