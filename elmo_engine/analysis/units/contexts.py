"""What one unit does: its value at every word of a corpus, its highest (or lowest) positions
as keyword-in-context lines (Karpathy et al. 2015), the words that drive it most, and its values
per label of a labelled set (a histogram per class).

:func:`unit_values` runs the step path of :mod:`elmo_engine.model.lstm_inspect` a batch at a
time and keeps only the one unit (a float per word), :func:`units_values` several units in the
same run; the rest works on those values.
:class:`UnitTop` ranks positions and words as the values come, a batch at a time, so that
:func:`scan_units` can run units over a corpus of any size (a corpus index's sentences) holding
only the ``show`` best positions and a sum per distinct word, several units in one run of the
model; :func:`top_contexts` and
:func:`word_means` are the same ranking over values held whole.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import torch

from elmo_engine.analysis.units.corpus import MAX_SCAN_UNITS
from elmo_engine.io.datasets.sentence_source import SentenceSource
from elmo_engine.errors import InputError
from elmo_engine.model.lstm_inspect import (Capture, StateKind, framed_tokens, inspect,
                                            state_width)
from elmo_engine.progress import TaskState, check, report

BATCH = 64
WINDOW = 6


def _check_unit(model, layer: int, kind: StateKind, unit: int) -> None:
    if not 0 <= layer < model.opts.n_layers:
        raise InputError(f"layer {layer}: the model has LSTM layers 0 … {model.opts.n_layers - 1}")
    width = state_width(model.opts, kind)
    if not 0 <= unit < width:
        raise InputError(f"unit {unit}: {kind.value} has units 0 … {width - 1}")


def _check_units(model, layer: int, kind: StateKind, units: Sequence[int]) -> None:
    """One to :data:`MAX_SCAN_UNITS` units, each one the model has (InputError otherwise)."""
    if not units:
        raise InputError("no unit given")
    if len(units) > MAX_SCAN_UNITS:
        raise InputError(f"{len(units)} units: one run of the model takes at most "
                         f"{MAX_SCAN_UNITS}")
    for unit in units:
        _check_unit(model, layer, kind, unit)


def _progress(units: Sequence[int]) -> str:
    return ("the unit over the corpus" if len(units) == 1
            else f"{len(units)} units over the corpus")


def _batch_values(model, chunk: List[List[str]], layer: int, direction: int, kind: StateKind,
                  units: Sequence[int], token_vectors) -> List[np.ndarray]:
    """The ``units``' values over one batch of sentences: a float32 (n, len(units)) view per
    sentence into the batch's array (a caller that keeps them copies what it keeps)."""
    tok, lengths = framed_tokens(model, chunk, token_vectors)
    res = inspect(model, tok, lengths, Capture(kinds=(kind,), layers=(layer,),
                                               directions=(direction,), dtype=torch.float32),
                  states_only=True)
    held = res.states[(layer, direction, kind)][:, :, list(units)].cpu().numpy()   # (B, T, U)
    return [held[r, 1:len(s) + 1] for r, s in enumerate(chunk)]


def unit_values(model, sentences: Sequence[Sequence[str]], layer: int, direction: int,
                kind: StateKind, unit: int, token_vectors=None,
                task: Optional[TaskState] = None) -> List[np.ndarray]:
    """The unit's value at each word of each sentence: one float32 (n,) array per sentence."""
    return [v[:, 0] for v in units_values(model, sentences, layer, direction, kind, (unit,),
                                          token_vectors, task)]


def units_values(model, sentences: Sequence[Sequence[str]], layer: int, direction: int,
                 kind: StateKind, units: Sequence[int], token_vectors=None,
                 task: Optional[TaskState] = None) -> List[np.ndarray]:
    """Several units' values at each word of each sentence in one run of the model: one float32
    (n, len(units)) array per sentence, the units' columns in the order given (at most
    :data:`MAX_SCAN_UNITS`)."""
    _check_units(model, layer, kind, units)
    out: List[np.ndarray] = []
    for first, chunk in SentenceSource.of(sentences).batches(BATCH):
        check(task)
        out += [v.copy() for v in
                _batch_values(model, chunk, layer, direction, kind, units, token_vectors)]
        report(task, first + len(chunk), len(sentences), _progress(units))
    return out


@dataclass(frozen=True)
class Context:
    """One position: the unit's ``value`` at ``word`` (``sentence``, ``token`` 0-based) with
    up to :data:`WINDOW` words either side."""

    value: float
    sentence: int
    token: int
    word: str
    left: str
    right: str


class UnitTop:
    """The ``show`` highest (``lowest``: most negative) positions and every word's mean value,
    fed a batch of sentences at a time (:meth:`add`, in corpus order). Positions rank by value,
    ties in corpus order; words by mean, ties in the order they first occur. It holds the
    ``show`` best positions (with their words around) and, unless ``words`` is False (a caller
    that shows no words), a sum and a count per distinct word, whatever the size of the
    corpus."""

    def __init__(self, show: int, lowest: bool = False, window: int = WINDOW,
                 words: bool = True):
        self.show, self.window = int(show), int(window)
        self.keeps_words = words
        self._next = 0                                    # the next sentence number expected
        self._sign = 1.0 if lowest else -1.0
        # the best positions as a heap whose top is the worst kept: (-key, Context) with
        # key = (sign * value, sentence, token), the smallest key first
        self._heap: List[Tuple[Tuple[float, int, int], Context]] = []
        self._words: Dict[str, List[float]] = {}          # word → [sum, count]
        self.positions = 0

    def add(self, first: int, sentences: Sequence[Sequence[str]],
            values: Sequence[np.ndarray]) -> None:
        """The values of ``sentences``, numbered from ``first`` in the corpus: after the
        sentences added before (ValueError otherwise: a position must not be ranked twice)."""
        if first < self._next:
            raise ValueError(f"sentence {first} comes after sentence {self._next - 1}: add the "
                             "corpus's sentences once each, in order")
        self._next = first + len(sentences)
        for s, (sent, vals) in enumerate(zip(sentences, values)):
            if len(vals) != len(sent):
                raise ValueError(f"sentence {first + s}: {len(vals)} values for {len(sent)} words")
            self.positions += len(vals)
            for w, v in zip(sent, vals) if self.keeps_words else ():
                acc = self._words.get(w)
                if acc is None:
                    self._words[w] = [float(v), 1]
                else:
                    acc[0] += float(v)
                    acc[1] += 1
            keys = self._sign * np.asarray(vals, dtype=np.float64)            # (n,)
            if not self.show or not len(keys):
                continue
            # only this sentence's best `show` can enter (stable: ties in word order)
            for i in np.argsort(keys, kind="stable")[:self.show]:
                neg = (-float(keys[i]), -(first + s), -int(i))     # the key, negated
                full = len(self._heap) == self.show
                if full and neg <= self._heap[0][0]:             # no better than the worst
                    break
                item = (neg, self._context(sent, vals, first + s, int(i)))
                (heapq.heapreplace if full else heapq.heappush)(self._heap, item)

    def _context(self, sent: Sequence[str], vals: np.ndarray, sentence: int, i: int) -> Context:
        w = self.window
        return Context(value=float(vals[i]), sentence=sentence, token=i, word=sent[i],
                       left=" ".join(sent[max(0, i - w):i]), right=" ".join(sent[i + 1:i + 1 + w]))

    def contexts(self) -> List[Context]:
        """The kept positions, best first."""
        return [c for _, c in sorted(self._heap, key=lambda item: item[0], reverse=True)]

    def words(self, show: Optional[int] = None) -> List[Tuple[str, float, int]]:
        """The ``show`` (default: as many as positions) words with the highest (lowest) mean
        value: (word, mean, count); none for a ranking made with ``words=False``."""
        ranked = sorted(((total / n, n, w) for w, (total, n) in self._words.items()),
                        key=lambda x: self._sign * x[0])
        return [(w, m, int(n)) for m, n, w in ranked[:self.show if show is None else show]]


def top_contexts(sentences: Sequence[Sequence[str]], values: Sequence[np.ndarray], show: int,
                 lowest: bool = False, window: int = WINDOW) -> List[Context]:
    """The ``show`` highest (``lowest``: most negative) positions, ties in corpus order."""
    top = UnitTop(show, lowest, window)
    top.add(0, sentences, values)
    return top.contexts()


def word_means(sentences: Sequence[Sequence[str]], values: Sequence[np.ndarray], show: int,
               lowest: bool = False) -> List[Tuple[str, float, int]]:
    """The ``show`` words with the highest (lowest) mean value: (word, mean, count)."""
    top = UnitTop(0, lowest)
    top.add(0, sentences, values)
    return top.words(show)


@dataclass(frozen=True)
class Scan:
    """What :func:`scan_units` read: ``sentences`` and ``tokens``, and whether the corpus holds
    more than that (``truncated``: ``max_tokens`` was reached)."""

    sentences: int
    tokens: int
    truncated: bool


def scan_units(model, source: SentenceSource, layer: int, direction: int, kind: StateKind,
               tops: Mapping[int, Sequence[UnitTop]], max_tokens: Optional[int] = None,
               token_vectors=None, task: Optional[TaskState] = None) -> Scan:
    """Units over ``source``'s sentences in one pass, a batch at a time: ``tops`` maps each unit
    to the rankings its values feed (the highest, the lowest, or both), so that several units
    cost one run of the model, not one each (at most :data:`MAX_SCAN_UNITS`). With
    ``max_tokens`` its first words only, whole sentences (:meth:`SentenceSource.batches`).
    Memory: one batch and the rankings, whatever the corpus's size; cancellable between
    batches."""
    units = list(tops)
    _check_units(model, layer, kind, units)
    batches = source.batches(BATCH, max_tokens)
    for first, chunk in batches:
        check(task)
        values = _batch_values(model, chunk, layer, direction, kind, units, token_vectors)
        for j, unit in enumerate(units):
            column = [v[:, j] for v in values]
            for top in tops[unit]:
                top.add(first, chunk, column)
        report(task, min(batches.tokens, batches.total), batches.total, _progress(units))
    return Scan(batches.sentences, batches.tokens, batches.truncated)


@dataclass(frozen=True)
class LabelHistogram:
    """The unit's values per label on shared ``edges`` (bins + 1,): ``counts[label]`` (bins,)
    and ``means[label]``; labels by count, most frequent first."""

    edges: np.ndarray
    counts: Dict[str, np.ndarray]
    means: Dict[str, float]


def label_histogram(labels: Sequence[Sequence[Optional[str]]], values: Sequence[np.ndarray],
                    bins: int = 30, top: int = 6) -> LabelHistogram:
    """Histogram of the unit's values per label (words labelled None are left out), for the
    ``top`` most frequent labels."""
    by: Dict[str, List[float]] = {}
    for labs, vals in zip(labels, values):
        for lab, v in zip(labs, vals):
            if lab is not None:
                by.setdefault(lab, []).append(float(v))
    if not by:
        raise InputError("no labelled words to make a histogram of")
    chosen = sorted(by, key=lambda k: (-len(by[k]), k))[:top]
    everything = np.concatenate([np.asarray(by[k]) for k in chosen])
    lo, hi = float(everything.min()), float(everything.max())
    if hi <= lo:
        hi = lo + 1e-6
    edges = np.linspace(lo, hi, bins + 1)
    return LabelHistogram(edges=edges,
                          counts={k: np.histogram(by[k], edges)[0] for k in chosen},
                          means={k: float(np.mean(by[k])) for k in chosen})
