"""What each direction can see: how far a token's vector moves when another token is replaced.

For a sentence of n tokens the sentence and its n variants with token *j* **replaced** by
``<UNK>`` (the word spelled ``<UNK>``, read by the char-CNN like any word; nothing is removed, so
positions stay aligned) run in batches of at most :func:`reach_rows_per_batch` variants, each
batch with the sentence itself as its first row (every comparison is within one batch), so the
memory held is bounded whatever n (issue 38: one batch of a 400-token sentence took 4.6 GB).
``reach[l, d, i, j]`` is the cosine distance between token *i*'s vector in layer *l*, direction
*d* (0 forward half, 1 backward half) in the sentence and in the variant without word *j*.

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

from elmo_engine.errors import InputError
from elmo_engine.model.chars import UNK_TOKEN as UNK
from elmo_engine.progress import TaskState, check, report

REPLACEMENT = UNK
#: longest sentence given a reach matrix: its n+1 rows of n+2 biLM steps are O(n²) work (issue
#: 38: 400 tokens took 100 s of two CPU cores on the bundled model, 200 tokens about 30 s)
MAX_REACH_TOKENS = 200
#: the most bytes one batch of variants may hold (the biLSTM's steps, the layers, their halves,
#: the float64 cosines; :func:`reach_rows_per_batch`)
REACH_BATCH_BYTES = 256 << 20


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


def reach_rows_per_batch(n: int, n_layers: int, output_dim: int, lstm_dim: int = 0) -> int:
    """How many variants of an ``n``-token sentence one batch runs within
    :data:`REACH_BATCH_BYTES` (at least one): per row and step, the layers (L+1, 2·out) float32
    held about four times over (the output, its halves, two float64 copies for the cosine) and
    the biLSTM's gates and states, 4·lstm_dim + 4·out float32 per LSTM layer (L of them) and
    direction, about three times over (measured on the bundled model: ~120 kB a row-step)."""
    per_step = n_layers * 2 * output_dim * 4 * 4 \
        + (n_layers - 1) * 2 * (4 * lstm_dim + 4 * output_dim) * 4 * 3
    per_row = (n + 2) * per_step
    return int(max(1, min(n, REACH_BATCH_BYTES // max(per_row, 1) - 1)))


def reach(embedder, tokens: Sequence[str], state: Optional[TaskState] = None) -> ReachMatrix:
    """The reach matrix of one sentence (its n variants in bounded batches)."""
    import torch

    from elmo_engine.analysis.language_model.states import framed_layers

    toks = tuple(tokens)
    n = len(toks)
    if n == 0:
        raise InputError("an empty sentence has no reach matrix")
    if n > MAX_REACH_TOKENS:
        raise InputError(f"a sentence of {n} tokens is too long for a reach matrix (at most "
                         f"{MAX_REACH_TOKENS}: it runs n+1 variants)")
    out = embedder.opts.output_dim
    n_layers = embedder.opts.n_output_layers
    rows = reach_rows_per_batch(n, n_layers, out, embedder.opts.lstm_dim)
    dist = np.empty((n_layers, 2, n, n), np.float32)                  # (L+1, 2, i, j)
    for j0 in range(0, n, rows):
        check(state)
        js = range(j0, min(n, j0 + rows))
        variants = [toks] + [toks[:j] + (REPLACEMENT,) + toks[j + 1:] for j in js]
        layers = framed_layers(embedder, variants)[:, :, 1:n + 1]      # (L+1, 1+c, n, 2·out)
        halves = torch.stack([layers[..., :out], layers[..., out:]], 1)   # (L+1, 2, 1+c, n, out)
        del layers
        base = halves[:, :, :1]                                       # (L+1, 2, 1, n, out)
        var = halves[:, :, 1:]                                        # (L+1, 2, c, i, out)
        cos = torch.nn.functional.cosine_similarity(var.double(), base.double(), dim=-1,
                                                    eps=1e-12)        # (L+1, 2, c, i)
        dist[:, :, :, j0:j0 + len(js)] = (1.0 - cos).clamp_min(0.0).transpose(2, 3).float().numpy()
    return ReachMatrix(tokens=toks, distance=dist)


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
    sents = [tuple(s) for s in sentences if 0 < len(s) <= MAX_REACH_TOKENS]   # longer: skipped
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
