"""The sentences that a unit's top contexts and the pattern search run over, read alike by
``units top``, ``units pattern`` and the Units view.

A corpus is a sentence file (one sentence per line, typed text tokenized as the app tokenizes it,
or ``pretokenized``; plain or gzip; a grouped ``group<TAB>sentence`` file gives its sentences,
its form told from the lines read, :func:`~elmo_engine.io.datasets.text_input.grouped_prefix`) or
CoNLL-U (``.conllu``, ``.conllu.gz``), whose UPOS tags go with the pattern search's matches. Only
the first ``max_tokens`` words are read, whole sentences, streaming (a longer corpus is cut, and
:attr:`UnitsCorpus.truncated` says so); at most ``MAX_FILE_BYTES`` (16 MiB) are read, lines and
sentences are bounded as the readers bound them (a CoNLL-U sentence at
``MAX_SENTENCE_TOKENS`` words), and a bad file is one :class:`~elmo_engine.errors.InputError`
naming it and the line. A sentence file's blank lines are skipped and counted, as every command
counts them (:meth:`UnitsCorpus.blank_note`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, List, Optional, Tuple

from elmo_engine.errors import InputError

#: the most sentences read from a corpus (with ``max_tokens``, the bound on what is held)
MAX_SENTENCES = 200_000
#: the words of a corpus a unit's contexts and a pattern search run over, in the command line
#: and the view alike (the whole bundled reference corpus, 81,792 words; a unit's values over
#: it take 3-6 s with the bundled model on 2 cores: docs/performance.md, "Units")
CORPUS_TOKENS = 100_000
#: the most units one scan ranks (``units top --unit``, :func:`contexts.scan_units`: each keeps
#: its own ranking, fed every word)
MAX_SCAN_UNITS = 64


@dataclass(frozen=True)
class UnitsCorpus:
    """The sentences read from ``path``.

    Attributes
    ----------
    sentences : the words of each sentence
    labels : per sentence its words' UPOS tags (CoNLL-U; a word without one: None), else None
    truncated : the file holds more than the words read
    blank : blank lines skipped among the lines read (a sentence file)
    blank_shown : the first ten of their line numbers
    """

    path: Path
    sentences: List[List[str]]
    labels: Optional[List[List[Optional[str]]]]
    truncated: bool
    blank: int = 0
    blank_shown: Tuple[int, ...] = field(default=())

    @property
    def tokens(self) -> int:
        return sum(len(s) for s in self.sentences)

    def describe(self) -> str:
        """``"corpus.txt (the first 30,000 words)"`` or ``"corpus.conllu (412 words)"``."""
        words = (f"the first {self.tokens:,} words" if self.truncated
                 else f"{self.tokens:,} words")
        return f"{self.path.name} ({words})"

    def blank_note(self) -> str:
        """``"skipped 2 blank lines (lines 3, 9) of in.txt"`` or ``""``."""
        from elmo_engine.io.datasets.text_input import blank_lines_note

        return blank_lines_note(self.path, self.blank_shown, self.blank)


def is_conllu(path: Path) -> bool:
    """Whether ``path`` names a CoNLL-U file (``.conllu``, ``.conllu.gz``, any case)."""
    return path.name.lower().endswith((".conllu", ".conllu.gz"))


#: bytes read (decompressed) to tell CoNLL-U from token<TAB>label by content
SNIFF_BYTES = 64 * 1024


def holds_conllu(path: Path) -> bool:
    """Whether ``path`` is CoNLL-U by its name (:func:`is_conllu`) or, whatever its name, by
    its first word line: ten tab-separated fields, the first a word id (``3``, ``3-4``,
    ``3.1``), where a token<TAB>label file has two. Reads at most :data:`SNIFF_BYTES`
    (plain or gzip); a file that cannot be read is left to the reader's own message."""
    import re

    from elmo_engine.io.datasets.textio import open_binary

    if is_conllu(path):
        return True
    try:
        with open_binary(path) as fh:
            head = fh.read(SNIFF_BYTES)
    except (InputError, OSError, EOFError, ValueError):
        return False
    for raw in head.split(b"\n")[:-1] or [head]:
        line = raw.decode("utf-8", "replace").strip("\r\ufeff")
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        return len(fields) == 10 and re.fullmatch(r"\d+(-\d+|\.\d+)?", fields[0]) is not None
    return False


def read_units_corpus(path, max_tokens: int, pretokenized: bool = False) -> UnitsCorpus:
    """The first ``max_tokens`` words of the corpus at ``path`` (see the module docstring).

    Raises InputError for a missing, unreadable or malformed file, or one without a sentence."""
    path = Path(path)
    conllu = is_conllu(path)
    sentences: List[List[str]] = []
    labels: List[List[Optional[str]]] = []
    count, truncated = 0, False
    blank: List[int] = [0]                      # the count, then the first ten line numbers

    def on_blank(lineno: int) -> None:
        blank[0] += 1
        if len(blank) <= 10:
            blank.append(lineno)

    for words, tags in _sentences(path, conllu, pretokenized, max_tokens, on_blank):
        if count >= max_tokens or len(sentences) >= MAX_SENTENCES:
            truncated = True
            break
        sentences.append(words)
        labels.append(tags)
        count += len(words)
    if not sentences:
        raise InputError("holds no sentence", path=path)
    return UnitsCorpus(path, sentences, labels if conllu else None, truncated, blank[0],
                       tuple(blank[1:]))


def _sentences(path: Path, conllu: bool, pretokenized: bool, max_tokens: int,
               on_blank: Callable[[int], None]
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
        from elmo_engine.io.datasets.text_input import grouped_prefix, iter_text_input

        # the form from the lines that will be read, not the whole file (a grouped corpus
        # of any size: its first max_tokens words, as a plain one)
        grouped = grouped_prefix(path, max_tokens, MAX_FILE_BYTES)
        for _line, words in iter_text_input(path, pretokenized, grouped, max_bytes=MAX_FILE_BYTES,
                                            max_sentences=None, on_blank=on_blank):
            yield words, []
