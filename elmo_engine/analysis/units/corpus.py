"""The sentences that a unit's top contexts and the pattern search run over, read alike by
``units top``, ``units pattern`` and the Units view.

A corpus is a sentence file (one sentence per line, typed text tokenized as the app tokenizes it,
or ``pretokenized``; plain or gzip; a grouped ``group<TAB>sentence`` file gives its sentences) or
CoNLL-U (``.conllu``, ``.conllu.gz``), whose UPOS tags go with the pattern search's matches. Only
the first ``max_tokens`` words are read, whole sentences, streaming (a longer corpus is cut, and
:attr:`UnitsCorpus.truncated` says so); at most ``MAX_FILE_BYTES`` (16 MiB) are read, lines and
sentences are bounded as the readers bound them (a CoNLL-U sentence at
``MAX_SENTENCE_TOKENS`` words), and a bad file is one :class:`~elmo_engine.errors.InputError`
naming it and the line.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

from elmo_engine.errors import InputError

#: the most sentences read from a corpus (with ``max_tokens``, the bound on what is held)
MAX_SENTENCES = 200_000


@dataclass(frozen=True)
class UnitsCorpus:
    """The sentences read from ``path``.

    Attributes
    ----------
    sentences : the words of each sentence
    labels : per sentence its words' UPOS tags (CoNLL-U; a word without one: None), else None
    truncated : the file holds more than the words read
    """

    path: Path
    sentences: List[List[str]]
    labels: Optional[List[List[Optional[str]]]]
    truncated: bool

    @property
    def tokens(self) -> int:
        return sum(len(s) for s in self.sentences)

    def describe(self) -> str:
        """``"corpus.txt (the first 30,000 words)"`` or ``"corpus.conllu (412 words)"``."""
        words = (f"the first {self.tokens:,} words" if self.truncated
                 else f"{self.tokens:,} words")
        return f"{self.path.name} ({words})"


def is_conllu(path: Path) -> bool:
    return path.name.lower().endswith((".conllu", ".conllu.gz"))


def read_units_corpus(path, max_tokens: int, pretokenized: bool = False) -> UnitsCorpus:
    """The first ``max_tokens`` words of the corpus at ``path`` (see the module docstring).

    Raises InputError for a missing, unreadable or malformed file, or one without a sentence."""
    from elmo_engine.io.datasets.sentences import MAX_FILE_BYTES
    from elmo_engine.model.tokenize import MAX_SENTENCE_TOKENS

    path = Path(path)
    sentences: List[List[str]] = []
    labels: Optional[List[List[Optional[str]]]] = None
    count, truncated = 0, False
    if is_conllu(path):
        from elmo_engine.io.datasets.conllu import read_conllu

        labels = []
        for s in itertools.islice(read_conllu(path, label="upos", max_bytes=MAX_FILE_BYTES),
                                  MAX_SENTENCES + 1):
            if count >= max_tokens or len(sentences) >= MAX_SENTENCES:
                truncated = True
                break
            if len(s.tokens) > MAX_SENTENCE_TOKENS:
                raise InputError(f"a sentence of {len(s.tokens):,} words (at most "
                                 f"{MAX_SENTENCE_TOKENS:,})", path=path, line=s.meta.get("line"))
            sentences.append(list(s.tokens))
            labels.append(list(s.labels))
            count += len(s.tokens)
    else:
        from elmo_engine.io.datasets.text_input import iter_text_input

        for _line, toks in iter_text_input(path, pretokenized, max_bytes=MAX_FILE_BYTES,
                                           max_sentences=None):
            if count >= max_tokens or len(sentences) >= MAX_SENTENCES:
                truncated = True
                break
            sentences.append(toks)
            count += len(toks)
    if not sentences:
        raise InputError("holds no sentence", path=path)
    return UnitsCorpus(path, sentences, labels, truncated)
