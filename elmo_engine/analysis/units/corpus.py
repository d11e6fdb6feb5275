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

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, List, Optional, Tuple

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
    """Whether ``path`` names a CoNLL-U file (``.conllu``, ``.conllu.gz``, any case)."""
    return path.name.lower().endswith((".conllu", ".conllu.gz"))


def read_units_corpus(path, max_tokens: int, pretokenized: bool = False) -> UnitsCorpus:
    """The first ``max_tokens`` words of the corpus at ``path`` (see the module docstring).

    Raises InputError for a missing, unreadable or malformed file, or one without a sentence."""
    path = Path(path)
    conllu = is_conllu(path)
    sentences: List[List[str]] = []
    labels: List[List[Optional[str]]] = []
    count, truncated = 0, False
    for words, tags in _sentences(path, conllu, pretokenized):
        if count >= max_tokens or len(sentences) >= MAX_SENTENCES:
            truncated = True
            break
        sentences.append(words)
        labels.append(tags)
        count += len(words)
    if not sentences:
        raise InputError("holds no sentence", path=path)
    return UnitsCorpus(path, sentences, labels if conllu else None, truncated)


def _sentences(path: Path, conllu: bool, pretokenized: bool
               ) -> Iterator[Tuple[List[str], List[Optional[str]]]]:
    """(words, UPOS tags) of each sentence, streamed (a sentence file's tags are empty)."""
    from elmo_engine.io.datasets.sentences import MAX_FILE_BYTES

    if conllu:
        from elmo_engine.io.datasets.conllu import read_conllu
        from elmo_engine.model.tokenize import MAX_SENTENCE_TOKENS

        for s in read_conllu(path, label="upos", max_bytes=MAX_FILE_BYTES):
            if len(s.tokens) > MAX_SENTENCE_TOKENS:
                raise InputError(f"a sentence of {len(s.tokens):,} words (at most "
                                 f"{MAX_SENTENCE_TOKENS:,})", path=path, line=s.meta.get("line"))
            yield list(s.tokens), list(s.labels)
    else:
        from elmo_engine.io.datasets.text_input import iter_text_input

        for _line, words in iter_text_input(path, pretokenized, max_bytes=MAX_FILE_BYTES,
                                            max_sentences=None):
            yield words, []
