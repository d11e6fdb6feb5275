"""Pattern search (LSTMVis, Strobelt et al. 2018): the units "on" over a span of a sentence, then
the spans of a corpus whose units are on in the same way.

A unit is *on* over a span when its value exceeds ``threshold`` at every position of the span
(the query's on-set Q). Every span of the same length in the corpus gets its own on-set S the
same way, and is scored by the Jaccard index |Q ∩ S| / |Q ∪ S| (0 when both are empty); ties go
to more shared units, then corpus order. The states come from the step path of
:mod:`elmo_engine.model.lstm_inspect` a batch at a time; only the best ``show`` spans are kept
(with their words around), so the corpus may be read a batch at a time too
(:class:`~elmo_engine.io.datasets.sentence_source.SentenceSource`: a corpus index's
sentences, ``units pattern --index``).
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from elmo_engine.io.datasets.sentence_source import SentenceSource
from elmo_engine.errors import InputError
from elmo_engine.model.lstm_inspect import Capture, StateKind, framed_tokens, inspect
from elmo_engine.progress import TaskState, check, report

BATCH = 64
WINDOW = 6


@dataclass(frozen=True)
class PatternMatch:
    """A corpus span: words ``start`` … ``end`` (1-based, inclusive) of ``sentence``
    (0-based); ``score`` the Jaccard index, ``shared`` |Q ∩ S|, ``on`` |S|; ``pos`` the span's
    labels (UPOS of a CoNLL-U corpus) or None."""

    sentence: int
    start: int
    end: int
    words: Tuple[str, ...]
    score: float
    shared: int
    on: int
    left: str
    right: str
    pos: Optional[Tuple[Optional[str], ...]] = None


@dataclass(frozen=True)
class PatternResult:
    query: Tuple[str, ...]
    span: Tuple[int, int]
    threshold: float
    on_units: Tuple[int, ...]
    spans: int                       # corpus spans scored
    matches: Tuple[PatternMatch, ...]
    sentences: int = 0               # corpus sentences read
    tokens: int = 0                  # and their words
    truncated: bool = False          # the corpus holds more (max_tokens)


def _states(model, sentences: Sequence[Sequence[str]], layer: int, direction: int,
            kind: StateKind, token_vectors) -> List[np.ndarray]:
    tok, lengths = framed_tokens(model, [list(s) for s in sentences], token_vectors)
    res = inspect(model, tok, lengths, Capture(kinds=(kind,), layers=(layer,),
                                               directions=(direction,), dtype=torch.float32),
                  states_only=True)
    held = res.states[(layer, direction, kind)].cpu().numpy()         # (B, T, width)
    return [held[r, 1:len(s) + 1] for r, s in enumerate(sentences)]


def span_on(values: np.ndarray, length: int, threshold: float) -> np.ndarray:
    """(n − length + 1, width) bool: the units above ``threshold`` at every position of each
    span of ``length`` words of one sentence's (n, width) ``values``."""
    above = values > threshold
    n = above.shape[0] - length + 1
    out = above[:n].copy()
    for k in range(1, length):
        out &= above[k:k + n]
    return out


def find_pattern(model, query: Sequence[str], span: Tuple[int, int], threshold: float,
                 layer: int, direction: int, kind: StateKind,
                 corpus: Union[Sequence[Sequence[str]], SentenceSource],
                 labels: Optional[Sequence[Sequence[Optional[str]]]] = None, show: int = 20,
                 token_vectors=None, task: Optional[TaskState] = None,
                 max_tokens: Optional[int] = None) -> PatternResult:
    """The query's on-set over words ``span`` = (i, j) (1-based, inclusive) and the ``show``
    corpus spans of j − i + 1 words that match it best (module docstring). ``corpus``: its
    sentences, or a :class:`SentenceSource` read a batch at a time (``max_tokens``:
    its first words only, whole sentences); ``labels`` go with sentences held."""
    if not 0 <= layer < model.opts.n_layers:
        raise InputError(f"--layer {layer}: the model has LSTM layers 0 … "
                         f"{model.opts.n_layers - 1}")
    i, j = span
    if not 1 <= i <= j <= len(query):
        raise InputError(f"--span {i}:{j}: the sentence has words 1 … {len(query)} "
                         "(I ≤ J, 1-based, inclusive)")
    length = j - i + 1
    q_vals = _states(model, [query], layer, direction, kind, token_vectors)[0]
    q = span_on(q_vals[i - 1:j], length, threshold)[0]               # (width,)
    if not q.any():
        raise InputError(f"no unit is above --threshold {threshold:g} at every word of "
                         f"{' '.join(query[i - 1:j])!r}; lower the threshold "
                         f"(largest span minimum: {float(q_vals[i - 1:j].min(0).max()):.3f})")
    source = corpus if isinstance(corpus, SentenceSource) else SentenceSource.of(corpus)
    # the best `show`, the worst first: (score, shared, -sentence, -first word) orders them
    # (larger is better; earlier corpus positions win ties), then the match itself
    heap: List[Tuple[float, int, int, int, PatternMatch]] = []
    scored = 0
    batches = source.batches(BATCH, max_tokens)
    for first, chunk in batches:
        check(task)
        for r, vals in enumerate(_states(model, chunk, layer, direction, kind, token_vectors)):
            if vals.shape[0] < length:
                continue
            sent = first + r
            on = span_on(vals, length, threshold)                    # (spans, width)
            inter = (on & q).sum(1)
            union = (on | q).sum(1)
            score = np.where(union > 0, inter / np.maximum(union, 1), 0.0)
            scored += len(score)
            for a in np.argsort(-score, kind="stable")[:show]:
                key = (float(score[a]), int(inter[a]), -sent, -int(a))
                if len(heap) == show and key <= heap[0][:4]:
                    continue
                words = chunk[r]
                a = int(a)
                match = PatternMatch(
                    sentence=sent, start=a + 1, end=a + length,
                    words=tuple(words[a:a + length]), score=key[0], shared=key[1],
                    on=int(on[a].sum()), left=" ".join(words[max(0, a - WINDOW):a]),
                    right=" ".join(words[a + length:a + length + WINDOW]),
                    pos=None if labels is None else tuple(labels[sent][a:a + length]))
                if len(heap) < show:
                    heapq.heappush(heap, (*key, match))
                else:
                    heapq.heapreplace(heap, (*key, match))
        report(task, min(batches.tokens, batches.total), batches.total, "matching the pattern")
    matches = tuple(item[4] for item in sorted(heap, key=lambda item: item[:4], reverse=True))
    return PatternResult(query=tuple(query), span=(i, j), threshold=threshold,
                         on_units=tuple(int(u) for u in np.flatnonzero(q)), spans=scored,
                         matches=matches, sentences=batches.sentences, tokens=batches.tokens,
                         truncated=batches.truncated)
