"""What each direction can see: how far a token's vector moves when another token is replaced.

For a sentence of n tokens the sentence and its n variants with token *j* **replaced** by
``<UNK>`` (the word spelled ``<UNK>``, read by the char-CNN like any word; nothing is removed, so
positions stay aligned) run in one batch. ``reach[l, d, i, j]`` is the cosine distance between
token *i*'s vector in layer *l*, direction *d* (0 forward half, 1 backward half) in the sentence
and in the variant without word *j*.

By construction (Peters et al. 2018's two one-directional LMs) the forward half of token *i*
depends only on tokens ≤ *i* and the backward half only on tokens ≥ *i*; layer 0 (the char-CNN
token layer) on token *i* alone. So ``reach[:, 0, i, j] = 0`` for *j > i*,
``reach[:, 1, i, j] = 0`` for *j < i* and ``reach[0, :, i, j] = 0`` for *j ≠ i*, exactly: the
tests check it, and a non-zero there would mean the model leaks context across directions.

:func:`reach_curve` averages the distance by signed word offset ``j − i`` over a corpus: how far
context reaches in each layer and direction.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

import numpy as np
import torch

from elmo_engine.analysis.language_model.states import framed_layers
from elmo_engine.errors import InputError
from elmo_engine.model.softmax import UNK
from elmo_engine.progress import TaskState, check, report

REPLACEMENT = UNK


@dataclass(frozen=True)
class ReachMatrix:
    """``distance`` (L+1, 2, n, n) float32: cosine distance of token i (layer, direction) when
    token j is replaced by ``replacement``."""

    tokens: Tuple[str, ...]
    distance: np.ndarray
    replacement: str = REPLACEMENT

    def to_json(self) -> list:
        return np.round(self.distance.astype(np.float64), 8).tolist()


@dataclass(frozen=True)
class ReachCurve:
    """Mean cosine distance by signed offset ``j − i`` (``offsets``), per layer and direction:
    ``mean`` (L+1, 2, len(offsets)); ``pairs`` (len(offsets),) how many (i, j) were averaged."""

    offsets: Tuple[int, ...]
    mean: np.ndarray
    pairs: np.ndarray
    sentences: int


def reach(embedder, tokens: Sequence[str]) -> ReachMatrix:
    """The reach matrix of one sentence (n+1 rows in one batch)."""
    toks = tuple(tokens)
    n = len(toks)
    if n == 0:
        raise InputError("an empty sentence has no reach matrix")
    variants = [toks] + [toks[:j] + (REPLACEMENT,) + toks[j + 1:] for j in range(n)]
    layers = framed_layers(embedder, variants)[:, :, 1:n + 1]          # (L+1, n+1, n, 2·out)
    out = embedder.opts.output_dim
    halves = torch.stack([layers[..., :out], layers[..., out:]], 1)   # (L+1, 2, n+1, n, out)
    base = halves[:, :, :1]                                           # (L+1, 2, 1, n, out)
    var = halves[:, :, 1:]                                            # (L+1, 2, j, i, out)
    cos = torch.nn.functional.cosine_similarity(var.double(), base.double(), dim=-1, eps=1e-12)
    dist = (1.0 - cos).clamp_min(0.0).transpose(2, 3)                 # (L+1, 2, i, j)
    return ReachMatrix(tokens=toks, distance=dist.float().numpy())


def reach_curve(embedder, sentences: Sequence[Sequence[str]], max_offset: int = 10,
                state: Optional[TaskState] = None) -> ReachCurve:
    """Mean reach by word offset over ``sentences`` (offsets −max … +max)."""
    if max_offset < 1:
        raise InputError("the largest offset must be at least 1")
    offsets = tuple(range(-max_offset, max_offset + 1))
    n_layers = embedder.opts.n_output_layers
    total = np.zeros((n_layers, 2, len(offsets)))
    count = np.zeros(len(offsets), np.int64)
    used = 0
    sents = [tuple(s) for s in sentences if len(s) > 0]
    for k, s in enumerate(sents):
        check(state)
        d = reach(embedder, s).distance                               # (L+1, 2, n, n)
        n = len(s)
        i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
        off = (j - i).ravel()
        keep = np.abs(off) <= max_offset
        idx = off[keep] + max_offset
        flat = d.reshape(n_layers, 2, n * n)[:, :, keep]
        for slot in range(len(offsets)):
            sel = idx == slot
            if sel.any():
                total[:, :, slot] += flat[:, :, sel].sum(-1)
        count += np.bincount(idx, minlength=len(offsets))
        used += 1
        report(state, k + 1, len(sents), "reach over the corpus")
    mean = total / np.maximum(count, 1)
    return ReachCurve(offsets=offsets, mean=mean.astype(np.float32), pairs=count, sentences=used)
