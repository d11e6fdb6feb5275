"""Corpus reading and batching for biLM training.

A corpus is plain UTF-8 text (optionally ``.gz``), one sentence or paragraph per line. Lines of
the form ``= … =`` (WikiText / OpenStax module headers) are skipped. Paragraphs are split into
sentences after tokenization. Each sentence is framed ``<S> … </S>`` and the framed sentences are
packed end to end into ``B`` parallel streams, cut into windows of ``T`` tokens; the LSTM state is
carried from one window to the next (truncated BPTT), as in bilm-tf (format doc §14).

The backward LM reads every stream reversed (``</S> wn … w1 <S>`` per sentence), so that its
carried state also flows in reading order. Window ``k`` holds, per direction, the input types
``(B, T)`` and the targets ``(B, T)``: the next token in that direction's reading order.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence

import numpy as np

from elmo_engine.model.chars import BOS_TOKEN, EOS_TOKEN, token_to_char_ids
from elmo_engine.errors import InputError
from elmo_engine.model.tokenize import tokenize, whitespace_tokenize

HEADER_RE = re.compile(r"^\s*=.*=\s*$")
SENT_END = {".", "!", "?"}
CLOSERS = {"”", "’", '"', "'", ")", "]", "''"}
OPENERS = {"“", "‘", '"', "'", "(", "[", "``"}
TOKENIZERS = ("regex", "whitespace")


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


def read_documents(path, tokenizer: str = "regex", skip_headers: bool = True,
                   sentences: bool = True, what: str = "corpus") -> List[List[List[str]]]:
    """Read a corpus file into documents of tokenized sentences.

    A document ends at a ``= … =`` header line or an empty line (a chapter or module of the
    shipped corpora). A file with no such boundary has one document per line, so that a file of
    one sentence per line is shuffled by sentence as before.

    Parameters
    ----------
    path : text file, UTF-8, optionally gzip-compressed (``.gz``)
    tokenizer : ``"regex"`` (:func:`elmo_engine.model.tokenize.tokenize`) or ``"whitespace"``
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
    if tokenizer not in TOKENIZERS:
        raise InputError(f"unknown tokenizer {tokenizer!r}; use one of {', '.join(TOKENIZERS)}")
    split = tokenize if tokenizer == "regex" else whitespace_tokenize
    from elmo_engine.files import regular_file_problem
    from elmo_engine.io.datasets.textio import open_text

    path = Path(path)
    if path.is_dir():
        raise InputError(f"the {what} must be a text file, not a folder", path=path)
    problem = regular_file_problem(path)
    if problem:
        raise InputError(f"cannot read the {what}: {problem}", path=path)
    # the one reader: a regular file (a FIFO or a device is refused), gzip by its magic bytes,
    # UTF-8, lines of at most 1 MiB; errors name the file and the line
    with open_text(path) as text_lines:
        for line in text_lines:
            header = HEADER_RE.match(line) is not None
            if not line.strip() or header:
                yield None
                if header and skip_headers:
                    continue
            toks = split(line)
            if not toks:
                continue
            yield split_sentences(toks) if sentences else [toks]


def iter_sentences(path, tokenizer: str = "regex", skip_headers: bool = True,
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


def read_sentences(path, tokenizer: str = "regex", skip_headers: bool = True,
                   sentences: bool = True, what: str = "corpus") -> List[List[str]]:
    """Every sentence of :func:`read_documents`, in file order."""
    return [s for doc in read_documents(path, tokenizer, skip_headers, sentences, what)
            for s in doc]


class TypeTable:
    """Every distinct token string seen (train + dev) → type id, its char ids and vocab id."""

    def __init__(self, max_chars: int = 50):
        self.max_chars = max_chars
        self.index: Dict[str, int] = {}
        self.types: List[str] = []

    def ids(self, tokens: Sequence[str]) -> List[int]:
        out = []
        for t in tokens:
            i = self.index.get(t)
            if i is None:
                i = self.index[t] = len(self.types)
                self.types.append(t)
            out.append(i)
        return out

    def char_ids(self) -> np.ndarray:
        """(n_types, max_chars) int64 character ids."""
        arr = np.empty((len(self.types), self.max_chars), dtype=np.int64)
        for i, t in enumerate(self.types):
            arr[i] = token_to_char_ids(t, self.max_chars)
        return arr

    def vocab_ids(self, vocab) -> np.ndarray:
        """(n_types,) int64: each type's softmax id (``<UNK>`` for words outside ``vocab``)."""
        return np.array([vocab.id(t) for t in self.types], dtype=np.int64)


def frame(table: TypeTable, sentences: Sequence[Sequence[str]]) -> List[np.ndarray]:
    """Each sentence as an int32 array of type ids, framed ``<S> … </S>``."""
    return [np.asarray(table.ids([BOS_TOKEN, *s, EOS_TOKEN]), dtype=np.int32) for s in sentences]


@dataclass
class Window:
    """One training window. Arrays are type ids (inputs) and type ids of targets, (2, B, T)."""

    index: int
    inputs: np.ndarray    # (2, B, T) int64: [0] forward reading order, [1] backward
    targets: np.ndarray   # (2, B, T) int64: the next type id in each direction


class Streams:
    """``B`` parallel token streams for one pass, cut into windows of ``T`` tokens.

    Parameters
    ----------
    framed : framed sentences (type ids)
    batch_size, unroll : B and T
    order : sentence order (a permutation), or None for file order
    """

    def __init__(self, framed: Sequence[np.ndarray], batch_size: int, unroll: int,
                 order: Optional[np.ndarray] = None):
        seq = framed if order is None else [framed[i] for i in order]
        stream = np.concatenate(seq) if seq else np.zeros(0, np.int32)
        row_len = len(stream) // batch_size
        self.batch_size, self.unroll = batch_size, unroll
        self.rows = stream[: batch_size * row_len].reshape(batch_size, row_len)   # (B, L)
        self.rows_rev = np.ascontiguousarray(self.rows[:, ::-1])                  # (B, L)
        self.n_windows = max(0, (row_len - 1) // unroll)

    def window(self, k: int) -> Window:
        t = self.unroll
        a, b = k * t, (k + 1) * t
        inputs = np.stack([self.rows[:, a:b], self.rows_rev[:, a:b]]).astype(np.int64)
        targets = np.stack([self.rows[:, a + 1:b + 1], self.rows_rev[:, a + 1:b + 1]])
        return Window(k, inputs, targets.astype(np.int64))

    def windows(self, start: int = 0) -> Iterator[Window]:
        for k in range(start, self.n_windows):
            yield self.window(k)


def epoch_order(n_sentences: int, seed: int, epoch: int,
                doc_starts: Optional[np.ndarray] = None) -> np.ndarray:
    """The sentence order of an epoch; a function of (seed, epoch) only.

    Without ``doc_starts`` a permutation of the sentences. With it (the index of each
    document's first sentence, ascending, starting at 0) the documents are shuffled and each
    keeps its sentences in order, so that the carried LSTM state reads documents of several
    corpora mixed, each as written."""
    rng = np.random.default_rng([seed, epoch])
    if doc_starts is None:
        return rng.permutation(n_sentences)
    bounds = np.append(np.asarray(doc_starts, dtype=np.int64), n_sentences)
    docs = rng.permutation(len(bounds) - 1)
    return np.concatenate([np.arange(bounds[i], bounds[i + 1]) for i in docs])
