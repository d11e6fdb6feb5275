"""How close a lower precision's vectors are to float32's: per-layer cosines over a text.

The measure of ``docs/performance.md`` (bf16 section): embed the same sentences with a float32
:class:`~elmo_engine.embed.embedder.Embedder` and with one in ``precision`` (e.g. bf16 on a CPU
with bf16 units), and for every layer take the cosine between the two vectors of each token; report
the median, the 0.1 % quantile and the minimum. Used by ``scripts/bf16_fidelity.py``,
``benchmarks/bench_bilm.py`` and ``tests/engine/test_bf16_cpu.py``.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import List, Sequence

import numpy as np

from elmo_engine.embed.embedder import Embedder
from elmo_engine.model.bilm import BiLM


@dataclass(frozen=True)
class LayerFidelity:
    """The cosines between one layer's vectors in two precisions, over ``n`` tokens."""

    layer: int
    median: float
    q001: float          # the 0.1 % quantile
    minimum: float
    n: int


def token_cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine of two (n, dim) arrays (float64); a zero row against a zero row is 1."""
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    dot = (a * b).sum(1)
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    out = np.ones(len(a))
    nz = norms > 0
    out[nz] = dot[nz] / norms[nz]
    return out


def layer_fidelity(reference: Sequence[np.ndarray], other: Sequence[np.ndarray]
                   ) -> List[LayerFidelity]:
    """Per layer, the cosines between ``reference`` and ``other`` (lists of the embedder's
    per-sentence (L+1, n, dim) arrays, the same sentences in the same order)."""
    ref = np.concatenate([r for r in reference if r.shape[1]], 1)   # (L+1, tokens, dim)
    oth = np.concatenate([o for o in other if o.shape[1]], 1)
    out = []
    for layer in range(ref.shape[0]):
        cos = token_cosines(ref[layer], oth[layer])
        out.append(LayerFidelity(layer, float(np.median(cos)), float(np.quantile(cos, 0.001)),
                                 float(cos.min()), int(cos.size)))
    return out


def compare_precisions(model: BiLM, sentences: Sequence[Sequence[str]], precision: str = "bf16",
                       device: str = "cpu") -> List[LayerFidelity]:
    """Embed ``sentences`` in float32 and in ``precision`` (on a copy of ``model``) and compare
    them layer by layer (:func:`layer_fidelity`)."""
    fp32 = Embedder(copy.deepcopy(model), device=device, cache_size=0).embed(sentences)
    low = Embedder(copy.deepcopy(model), device=device, precision=precision,
                   cache_size=0).embed(sentences)
    return layer_fidelity(fp32, low)
