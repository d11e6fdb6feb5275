"""The cached projector: PCA and UMAP per layer of a token set, keyed by what determines them."""
from __future__ import annotations

import threading
import time
from typing import Any, List, Optional, Sequence

import numpy as np
from cachetools import LRUCache

from elmo_engine.errors import InputError
from elmo_engine.progress import TaskState, check, report
from elmo_engine.analysis.projection import umapfit
from elmo_engine.analysis.projection.compute import (LayerSpec, PcaResult, Projection, UmapParams,
                                                     _as_2d, layer_features, pca)
from elmo_engine.analysis.projection.tokens import TokenSet


class Projector:
    """Computes and caches projections of token sets.

    Results are keyed by (model checksum, token-set digest, layer, method, parameters); a hit
    returns the very same :class:`Projection` object. Safe to call from several threads at once
    (the cache and its counts are behind one lock; two threads that miss the same key both
    compute it, and the result is the same).

    Parameters
    ----------
    max_entries : projections (and PCA reductions) kept, least recently used dropped first
    """

    def __init__(self, max_entries: int = 64):
        self.max_entries = int(max_entries)
        self._cache: LRUCache = LRUCache(maxsize=max(1, self.max_entries))
        self._lock = threading.Lock()
        self.stats = {"hits": 0, "misses": 0}

    def _get(self, key: tuple) -> Any:
        with self._lock:
            return self._cache.get(key)

    def _put(self, key: tuple, value: Any) -> None:
        with self._lock:
            self._cache[key] = value

    def cached(self, tokens: TokenSet, layer: LayerSpec, method: str,
               params: Optional[UmapParams] = None, checksum: str = "") -> Optional[Projection]:
        """The cached projection, or None (does not count as a hit or miss)."""
        key_params = params if method == "umap" else None
        return self._get((checksum, tokens.digest, layer, method, key_params))

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()

    def _counted(self, key):
        """The cached projection for ``key``, counted in ``stats`` as a hit, or None (a miss)."""
        with self._lock:
            hit = self._cache.get(key)
            self.stats["hits" if hit is not None else "misses"] += 1
        return hit

    def _reduced(self, activations, tokens: TokenSet, layer: LayerSpec, dims: int,
                 checksum: str) -> PcaResult:
        key = (checksum, tokens.digest, layer, "pca-reduce", dims)
        hit = self._get(key)
        if hit is None:
            hit = pca(layer_features(activations, tokens, layer), dims)
            self._put(key, hit)
        return hit

    def pca(self, activations: Sequence[np.ndarray], tokens: TokenSet, layer: LayerSpec,
            checksum: str = "", dims: int = 50) -> Projection:
        """The PCA 2-D projection (the first two of ``dims`` components), cached."""
        key = (checksum, tokens.digest, layer, "pca", None)
        hit = self._counted(key)
        if hit is not None:
            return hit
        t0 = time.perf_counter()
        red = self._reduced(activations, tokens, layer, dims, checksum)
        coords = _as_2d(red.coords)
        coords.setflags(write=False)
        ex = [float(e) for e in red.explained[:2]] + [0.0] * max(0, 2 - red.explained.size)
        proj = Projection(layer, "pca", coords, time.perf_counter() - t0, explained=(ex[0], ex[1]))
        self._put(key, proj)
        return proj

    def umap(self, activations: Sequence[np.ndarray], tokens: TokenSet, layer: LayerSpec,
             params: UmapParams = UmapParams(), checksum: str = "",
             state: Optional[TaskState] = None) -> Projection:
        """The UMAP 2-D projection (PCA to ``params.pca_dims`` first), cached."""
        key = (checksum, tokens.digest, layer, "umap", params)
        hit = self._counted(key)
        if hit is not None:
            return hit
        t0 = time.perf_counter()
        red = self._reduced(activations, tokens, layer, params.pca_dims, checksum)
        check(state)
        coords = umapfit.umap_2d(red.coords, params, state)
        coords.setflags(write=False)
        proj = Projection(layer, "umap", coords, time.perf_counter() - t0, params=params)
        self._put(key, proj)
        return proj

    def run(self, activations: Sequence[np.ndarray], tokens: TokenSet,
            layers: Sequence[LayerSpec], method: str = "umap",
            params: UmapParams = UmapParams(), checksum: str = "",
            state: Optional[TaskState] = None, pca_fallback: bool = False) -> List[Projection]:
        """Project every layer in turn; progress counts layers, cancel is checked between them.

        With ``pca_fallback`` a layer with too few distinct vectors for UMAP (a short word list
        at layer 0, where each word has one vector) gets its PCA projection instead.
        """
        if method not in ("pca", "umap"):
            raise InputError(f"unknown projection method {method!r} (use 'pca' or 'umap')")
        out: List[Projection] = []
        for i, layer in enumerate(layers):
            report(state, i, len(layers), f"{method.upper()} of {layer.name} "
                                          f"({len(tokens):,} tokens)")
            check(state)
            if method == "pca":
                out.append(self.pca(activations, tokens, layer, checksum, params.pca_dims))
            else:
                try:
                    out.append(self.umap(activations, tokens, layer, params, checksum, state))
                except InputError:
                    if not pca_fallback:
                        raise
                    out.append(self.pca(activations, tokens, layer, checksum, params.pca_dims))
        report(state, len(layers), len(layers), f"{method.upper()} done")
        return out
