"""What one unit does: its value at every word of a corpus, its highest (or lowest) positions
as keyword-in-context lines (Karpathy et al. 2015), the words that drive it most, and its values
per label of a labelled set (a histogram per class).

:func:`unit_values` runs the step path of :mod:`elmo_engine.model.lstm_inspect` a batch at a
time and keeps only the one unit (a float per word); the rest works on those values.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from elmo_engine.errors import InputError
from elmo_engine.model.lstm_inspect import (Capture, StateKind, framed_tokens, inspect,
                                            state_width)
from elmo_engine.progress import TaskState, check, report

BATCH = 64
WINDOW = 6


def unit_values(model, sentences: Sequence[Sequence[str]], layer: int, direction: int,
                kind: StateKind, unit: int, token_vectors=None,
                task: Optional[TaskState] = None) -> List[np.ndarray]:
    """The unit's value at each word of each sentence: one float32 (n,) array per sentence."""
    if not 0 <= layer < model.opts.n_layers:
        raise InputError(f"layer {layer}: the model has LSTM layers 0 … {model.opts.n_layers - 1}")
    width = state_width(model.opts, kind)
    if not 0 <= unit < width:
        raise InputError(f"unit {unit}: {kind.value} has units 0 … {width - 1}")
    out: List[np.ndarray] = []
    for start in range(0, len(sentences), BATCH):
        check(task)
        chunk = [list(s) for s in sentences[start:start + BATCH]]
        tok, lengths = framed_tokens(model, chunk, token_vectors)
        res = inspect(model, tok, lengths, Capture(kinds=(kind,), layers=(layer,),
                                                   directions=(direction,),
                                                   dtype=torch.float32),
                      states_only=True)
        held = res.states[(layer, direction, kind)][:, :, unit].cpu().numpy()   # (B, T)
        out += [held[r, 1:len(s) + 1].copy() for r, s in enumerate(chunk)]
        report(task, min(start + BATCH, len(sentences)), len(sentences),
               "the unit over the corpus")
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


def top_contexts(sentences: Sequence[Sequence[str]], values: Sequence[np.ndarray], show: int,
                 lowest: bool = False, window: int = WINDOW) -> List[Context]:
    """The ``show`` highest (``lowest``: most negative) positions, ties in corpus order."""
    flat = [(float(v), s, i) for s, vals in enumerate(values) for i, v in enumerate(vals)]
    sign = 1.0 if lowest else -1.0
    flat.sort(key=lambda x: sign * x[0])
    return [Context(value=v, sentence=s, token=i, word=sentences[s][i],
                    left=" ".join(sentences[s][max(0, i - window):i]),
                    right=" ".join(sentences[s][i + 1:i + 1 + window]))
            for v, s, i in flat[:show]]


def word_means(sentences: Sequence[Sequence[str]], values: Sequence[np.ndarray], show: int,
               lowest: bool = False) -> List[Tuple[str, float, int]]:
    """The ``show`` words with the highest (lowest) mean value: (word, mean, count)."""
    by_word: Dict[str, List[float]] = {}
    for sent, vals in zip(sentences, values):
        for w, v in zip(sent, vals):
            by_word.setdefault(w, []).append(float(v))
    sign = 1.0 if lowest else -1.0
    words = sorted(((sum(v) / len(v), len(v), w) for w, v in by_word.items()),
                   key=lambda x: sign * x[0])[:show]
    return [(w, m, n) for m, n, w in words]


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
