"""Corpus text as the trainer and the corpus index read it: documents of tokenized sentences.

A file (plain or gzip, UTF-8) holds paragraphs or sentences, one per line; ``= … =`` header lines
and empty lines end a document. A ``group<TAB>sentence`` file (``.tsv``, or a first line with a
tab: :func:`~elmo_engine.io.datasets.sentences.is_grouped`) gives its sentences only — the text
after a line's last tab, so ``word<TAB>source<TAB>sentence`` reads alike — its ``#`` lines being
comments. :func:`split_sentences` cuts a paragraph's tokens into sentences;
:func:`read_documents` / :func:`read_sentences` read a whole file (the trainer shuffles
documents), :func:`iter_sentences` the same sentences one line at a time (the corpus index, which
never holds its corpus). Errors name the file and the line.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator, List, Optional, Sequence

from elmo_engine.errors import InputError
from elmo_engine.model.tokenize import Tokenization, tokenize, whitespace_tokenize

HEADER_RE = re.compile(r"^\s*=.*=\s*$")
SENT_END = {".", "!", "?"}
CLOSERS = {"”", "’", '"', "'", ")", "]", "''"}
OPENERS = {"“", "‘", '"', "'", "(", "[", "``"}


def split_sentences(tokens: Sequence[str]) -> List[List[str]]:
    """Split a tokenized paragraph after ``. ! ?`` (and a closing quote) before a capital."""
    out: List[List[str]] = []
    cur: List[str] = []
    n = len(tokens)
    i = 0
    while i < n:
        cur.append(tokens[i])
        if tokens[i] in SENT_END:
            while i + 1 < n and tokens[i + 1] in CLOSERS:
                i += 1
                cur.append(tokens[i])
            nxt = tokens[i + 1] if i + 1 < n else None
            if nxt is None or nxt[0].isupper() or nxt[0].isdigit() or nxt in OPENERS:
                out.append(cur)
                cur = []
        i += 1
    if cur:
        out.append(cur)
    return out


def read_documents(path, tokenizer: str = Tokenization.TYPED, skip_headers: bool = True,
                   sentences: bool = True, what: str = "corpus") -> List[List[List[str]]]:
    """Read a corpus file into documents of tokenized sentences.

    A document ends at a ``= … =`` header line or an empty line (a chapter or module of the
    shipped corpora). A file with no such boundary has one document per line, so that a file of
    one sentence per line is shuffled by sentence as before.

    Parameters
    ----------
    path : text file, UTF-8, optionally gzip-compressed (``.gz``)
    tokenizer : a :class:`~elmo_engine.model.tokenize.Tokenization` or its name: ``"tokenize"``
        (typed text; ``"regex"``, its older name, too) or ``"whitespace"``
    skip_headers : drop ``= … =`` header lines (they still end a document)
    sentences : split paragraphs into sentences

    Raises
    ------
    InputError : unreadable file, bad gzip data, not UTF-8 (with the line), or no tokens at all
    """
    docs: List[List[List[str]]] = []
    lines: List[List[List[str]]] = []            # the same sentences, a document per line
    cur: List[List[str]] = []
    for sents in _line_sentences(path, tokenizer, skip_headers, sentences, what):
        if sents is None:
            if cur:
                docs.append(cur)
                cur = []
            continue
        cur.extend(sents)
        lines.append(sents)
    if cur:
        docs.append(cur)
    if not docs:
        raise _empty(path, what, skip_headers)
    return docs if len(docs) > 1 else lines


def _empty(path, what: str, skip_headers: bool) -> InputError:
    return InputError(f"the {what} is empty: no tokens"
                      + (" outside '= … =' header lines" if skip_headers else ""), path=path)


def _line_sentences(path, tokenizer: str, skip_headers: bool, sentences: bool, what: str
                    ) -> Iterator[Optional[List[List[str]]]]:
    """Per line of the file: None where a document ends (an empty line or a ``= … =`` header),
    else the line's sentences; one line at a time (nothing is kept)."""
    try:
        typed = Tokenization.parse(tokenizer) is Tokenization.TYPED
    except ValueError as e:
        raise InputError(str(e)) from None
    # a pretokenized line is split on whitespace as it always was here (str.split, nothing
    # blanked), so that the sentences, and with them an index's or a training run's identity,
    # stay those of the files written before
    split = tokenize if typed else whitespace_tokenize
    from elmo_engine.files import regular_file_problem
    from elmo_engine.io.datasets.textio import open_text

    path = Path(path)
    if path.is_dir():
        raise InputError(f"the {what} must be a text file, not a folder", path=path)
    problem = regular_file_problem(path)
    if problem:
        raise InputError(f"cannot read the {what}: {problem}", path=path)
    from elmo_engine.io.datasets.sentences import is_grouped

    # a group<TAB>sentence file (resources/demo_sentences.tsv) is read as the app reads it: its
    # '#' lines are comments and its groups are not text
    grouped = is_grouped(path)
    # the one reader: a regular file (a FIFO or a device is refused), gzip by its magic bytes,
    # UTF-8, lines of at most 1 MiB; errors name the file and the line
    with open_text(path) as text_lines:
        for line in text_lines:
            if grouped:
                if line.lstrip().startswith("#"):
                    continue
                group, tab, rest = line.rpartition("\t")   # the text after the last tab
                line = rest
            header = HEADER_RE.match(line) is not None
            if not line.strip() or header:
                yield None
                if header and skip_headers:
                    continue
            toks = split(line)
            if not toks:
                continue
            yield split_sentences(toks) if sentences else [toks]


def iter_sentences(path, tokenizer: str = Tokenization.TYPED, skip_headers: bool = True,
                   sentences: bool = True, what: str = "corpus") -> Iterator[List[str]]:
    """The sentences :func:`read_sentences` returns, in the same order, read one line at a time:
    memory does not grow with the file (the corpus index reads its corpus so). Errors as
    :func:`read_documents`'s, the "empty" one once the file is read."""
    seen = False
    for sents in _line_sentences(path, tokenizer, skip_headers, sentences, what):
        if sents:
            seen = True
            yield from sents
    if not seen:
        raise _empty(path, what, skip_headers)


def read_sentences(path, tokenizer: str = Tokenization.TYPED, skip_headers: bool = True,
                   sentences: bool = True, what: str = "corpus") -> List[List[str]]:
    """Every sentence of :func:`read_documents`, in file order."""
    return [s for doc in read_documents(path, tokenizer, skip_headers, sentences, what)
            for s in doc]
