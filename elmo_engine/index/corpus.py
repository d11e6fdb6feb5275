"""The corpus a corpus index is built from, read as a stream (issue 29: bounded memory).

:class:`CorpusReader` reads the files again each time it is iterated, one line at a time
(:func:`elmo_engine.io.datasets.corpus_text.iter_sentences`, the trainer's tokenizer and splitter,
``= … =`` headers skipped), so that no pass holds the corpus: a first pass counts it
(:func:`count_corpus`: the manifest's totals and each shard's tokens, for progress), the
embedding pass takes the shards it is missing (:func:`shard_blocks`), one shard at a time.
Sentences longer than the embedder's limit are cut into pieces, as every reader of the index
cuts them.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Container, Iterable, Iterator, List, Optional, Sequence, Tuple

from elmo_engine.index.store import Reading
from elmo_engine.model.tokenize import MAX_SENTENCE_TOKENS, Tokenization


@dataclass(frozen=True)
class CorpusReader:
    """The sentences of corpus files, in order, read anew at each iteration (never all held)."""

    paths: Tuple[Path, ...]
    tokenizer: Tokenization = Tokenization.TYPED   # or WHITESPACE (pretokenized text)
    split: bool = True                  # paragraphs into sentences (the trainer's splitter)

    @classmethod
    def of(cls, paths, pretokenized: bool = False, split: bool = True) -> "CorpusReader":
        """The reader of ``index``'s options (``--pretokenized``, ``--split-sentences``), as the
        command and the app's Corpus view both build it."""
        return cls(tuple(Path(p) for p in paths), Tokenization.of(pretokenized), split)

    def __iter__(self) -> Iterator[List[str]]:
        from elmo_engine.io.datasets.corpus_text import iter_sentences

        for path in self.paths:
            for s in iter_sentences(path, self.tokenizer, skip_headers=True,
                                    sentences=self.split):
                for i in range(0, len(s), MAX_SENTENCE_TOKENS):
                    yield s[i:i + MAX_SENTENCE_TOKENS]

    def reading(self) -> Reading:
        """How the files are read: part of the index's identity (a resumed build reads alike)."""
        return Reading(self.tokenizer, self.split, skip_headers=True)


@dataclass(frozen=True)
class CorpusCount:
    """What a counting pass found: totals and the tokens of each shard of ``shard_size``."""

    n_sentences: int
    n_tokens: int
    shard_size: int
    shard_tokens: Tuple[int, ...]


def count_corpus(sentences: Iterable[Sequence[str]], shard_size: int) -> CorpusCount:
    """Count ``sentences`` (one pass, nothing kept) in shards of ``shard_size`` sentences."""
    shard_tokens: List[int] = []
    n = tokens = 0
    for s in sentences:
        if n % shard_size == 0:
            shard_tokens.append(0)
        shard_tokens[-1] += len(s)
        tokens += len(s)
        n += 1
    return CorpusCount(n, tokens, shard_size, tuple(shard_tokens))


def shard_blocks(sentences: Iterable[Sequence[str]], shard_size: int,
                 wanted: Optional[Container[int]] = None
                 ) -> Iterator[Tuple[int, List[Sequence[str]]]]:
    """``(k, sentences of shard k)`` for the shards in ``wanted`` (None: all), in order, one
    shard held at a time; the sentences of the other shards are read and dropped."""
    block: List[Sequence[str]] = []
    k = 0
    for i, s in enumerate(sentences):
        k = i // shard_size
        if wanted is None or k in wanted:
            block.append(s)
        if len(block) and (i + 1) % shard_size == 0:
            yield k, block
            block = []
    if block:
        yield k, block


__all__ = ["CorpusCount", "CorpusReader", "count_corpus", "shard_blocks"]
