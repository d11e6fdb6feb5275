"""Batching for biLM training.

The corpus (plain UTF-8 text, optionally ``.gz``, one sentence or paragraph per line, ``= … =``
headers skipped, paragraphs split into sentences) is read by
:mod:`elmo_engine.io.datasets.corpus_text`, which the corpus index shares. Each sentence is
framed ``<S> … </S>`` and the framed sentences are packed end to end into ``B`` parallel
streams, cut into windows of ``T`` tokens; the LSTM state is carried from one window to the next
(truncated BPTT), as in bilm-tf (format doc §14).

The backward LM reads every stream reversed (``</S> wn … w1 <S>`` per sentence), so that its
carried state also flows in reading order. Window ``k`` holds, per direction, the input types
``(B, T)`` and the targets ``(B, T)``: the next token in that direction's reading order.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Sequence

import numpy as np

from elmo_engine.model.chars import BOS_TOKEN, EOS_TOKEN, token_to_char_ids


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
