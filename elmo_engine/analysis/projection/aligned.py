"""Aligned layer trajectories: one 2-D layout per layer in a shared frame (issue 42).

The Projection view fits each layer's map on its own, so a token sits in unrelated places in the
panels. Two ways to put the layers of one token set in one frame, so that a token can be followed
from the context-free layer 0 to the top layer:

* **AlignedUMAP** (:data:`AlignMethod.ALIGNED_UMAP`) — umap-learn's ``AlignedUMAP`` (McInnes et
  al., "UMAP: Uniform Manifold Approximation and Projection", 2018; the aligned variant of the
  umap-learn documentation, "AlignedUMAP for time varying data"): one UMAP per layer, optimised
  *together*, with a penalty (``alignment_regularisation``) on how far a token moves from its
  place in the neighbouring layers; the relation between consecutive layers is the identity over
  the same tokens. Preserves each layer's local neighbourhoods (as UMAP does) *and* keeps
  tokens whose neighbourhood does not change in place: the motion shows change, not the layout's
  arbitrary rotation. Distances between clusters and the axes mean nothing; slower (all layers in
  one fit, epochs cannot be shared with the per-layer cache).
* **Procrustes** (:data:`AlignMethod.PROCRUSTES`) — each layer's own map (PCA or UMAP, exactly
  the panel's, from the projector's cache) moved onto a chosen reference layer by the similarity
  transform ``s · X R + t`` (``R`` orthogonal: rotation or reflection; ``s`` one scale; ``t`` a
  translation) that minimises the squared distances of the same tokens (Gower 1975,
  "Generalized Procrustes analysis"; Schönemann 1966). A similarity transform changes no
  distance ratio, so each layer's map keeps exactly what it had (PCA: the variance on its first
  two axes; UMAP: its neighbourhoods); only the frame is shared. Identical maps coincide exactly.

A "layer" here is an :class:`AlignedLayer`: a biLM layer, whole or one direction's half (layer
``l ≥ 1`` is ``[forward_l, backward_l]``; layer 0 is ``[token, token]``, the char-CNN output
shared by both directions, so its two halves are the same vector).

Interpolation between layers (:func:`interpolate`) is linear in the aligned positions; the
tokens whose neighbourhood changes most are in :mod:`.knn_change`; the animation writer in
:mod:`.animation`.
"""
from __future__ import annotations

import enum
import re
import time
import warnings
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np

from elmo_engine.errors import InputError
from elmo_engine.progress import TaskState, check, report
from elmo_engine.analysis.projection.epoch_hook import epoch_hook
from elmo_engine.analysis.projection.compute import (MIN_UMAP_POINTS, LayerSpec, UmapParams,
                                                     layer_features, pca)
from elmo_engine.analysis.projection.projector import Projector
from elmo_engine.analysis.projection.tokens import TokenSet

#: AlignedUMAP's default penalty on a token's move between neighbouring layers (umap-learn's)
ALIGNMENT_REGULARISATION = 1e-2


class AlignMethod(enum.Enum):
    """How the layers' layouts are put in one frame (see the module docstring)."""

    ALIGNED_UMAP = "umap"
    PROCRUSTES = "procrustes"


class Half(enum.Enum):
    """The whole layer or one direction's half of it."""

    BOTH = ""
    FORWARD = "f"
    BACKWARD = "b"


@dataclass(frozen=True)
class AlignedLayer:
    """One "layer" of a trajectory: biLM layer ``index``, whole or one ``half``."""

    index: int
    half: Half = Half.BOTH

    @property
    def name(self) -> str:
        word = {Half.BOTH: "", Half.FORWARD: " forward", Half.BACKWARD: " backward"}[self.half]
        return f"layer {self.index}{word}"

    @property
    def key(self) -> str:
        """``layer1``, ``layer1f``, ``layer1b``: file names and column names."""
        return f"layer{self.index}{self.half.value}"


_LAYER_ITEM = re.compile(r"^(\d{1,2})([fb]?)$")


def parse_layers(text: str, n_layers: int) -> Tuple[AlignedLayer, ...]:
    """``"0,1,2"`` or ``"0f 1f 2f"`` (``f`` forward half, ``b`` backward half) → the layers,
    each checked against a model of ``n_layers`` (layer 0 … n_layers-1); at least two.

    Raises
    ------
    InputError
        Naming the item that is not a layer.
    """
    items = [t for t in re.split(r"[\s,;]+", text.strip()) if t]
    out = []
    for t in items:
        m = _LAYER_ITEM.match(t.lower())
        if m is None:
            raise InputError(f"layers: {t!r} is not a layer (use e.g. 0,1,2 or 0f,1f,2f; f: "
                             "forward half, b: backward half)")
        index = int(m.group(1))
        if index >= n_layers:
            raise InputError(f"layers: layer {index} does not exist (the model has layers "
                             f"0..{n_layers - 1})")
        out.append(AlignedLayer(index, Half(m.group(2))))
    if len(out) < 2:
        raise InputError(f"layers: a trajectory needs at least two layers, got {text!r}")
    return tuple(out)


def aligned_features(activations: Sequence[np.ndarray], tokens: TokenSet, layer: AlignedLayer
                     ) -> np.ndarray:
    """The ``(N, D)`` features of ``tokens`` at ``layer`` (``(N, D/2)`` for a half)."""
    x = layer_features(activations, tokens, LayerSpec.single(layer.index))      # (N, D)
    half = x.shape[1] // 2
    if layer.half is Half.FORWARD:
        return np.ascontiguousarray(x[:, :half])                                 # (N, D/2)
    if layer.half is Half.BACKWARD:
        return np.ascontiguousarray(x[:, half:])                                 # (N, D/2)
    return x


@dataclass(frozen=True)
class AlignedLayouts:
    """The layers' layouts in one frame.

    Attributes
    ----------
    layers : the layers, in trajectory order
    coords : ``(n_layers, N, 2)`` float32, read-only
    method : how they were aligned
    base : for Procrustes, the per-layer map ("pca" or "umap"); "umap" for AlignedUMAP
    reference : for Procrustes, the index (into ``layers``) of the layer the others were moved
        onto; None for AlignedUMAP
    residuals : for Procrustes, per layer, the root-mean-square distance left between the moved
        layer and the reference, as a fraction of the reference's spread (0 for the reference)
    seconds : time spent
    pca_instead : Procrustes with UMAP maps: the layers with too few distinct vectors for UMAP
        (layer 0 of one word), drawn with PCA instead, as the Maps tab does
    """

    layers: Tuple[AlignedLayer, ...]
    coords: np.ndarray
    method: AlignMethod
    base: str
    reference: Optional[int]
    residuals: Tuple[float, ...]
    seconds: float
    pca_instead: Tuple[str, ...] = ()


# ---- Procrustes ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Similarity:
    """``y ≈ scale · x @ rotation + translation`` (``rotation`` (2, 2) orthogonal)."""

    rotation: np.ndarray
    scale: float
    translation: np.ndarray

    def apply(self, x: np.ndarray) -> np.ndarray:
        """``x (N, 2)`` moved: ``(N, 2)`` float64."""
        return self.scale * (np.asarray(x, np.float64) @ self.rotation) + self.translation


def procrustes(x: np.ndarray, y: np.ndarray, reflection: bool = True) -> Similarity:
    """The similarity transform that moves ``x (N, k)`` closest to ``y (N, k)`` (least squares).

    Centre both, ``R = U Vᵀ`` from the SVD ``U Σ Vᵀ`` of ``x_cᵀ y_c`` (orthogonal Procrustes, as
    ``scipy.linalg.orthogonal_procrustes``), ``s = tr Σ / ‖x_c‖²``, ``t = ȳ − s x̄ R``. With
    ``reflection`` False the last singular direction is flipped when needed so that ``det R =
    +1`` (a rotation only). A constant ``x`` gets ``s = 0`` (every point onto ``ȳ``).
    """
    x = np.asarray(x, np.float64)
    y = np.asarray(y, np.float64)
    if x.shape != y.shape or x.ndim != 2:
        raise InputError(f"Procrustes needs two arrays of one shape, got {x.shape} and {y.shape}")
    mx, my = x.mean(axis=0), y.mean(axis=0)                                # (k,)
    xc, yc = x - mx, y - my                                                # (N, k)
    u, sig, vt = np.linalg.svd(xc.T @ yc)                                  # (k, k), (k,), (k, k)
    if not reflection and np.linalg.det(u @ vt) < 0:
        u[:, -1] *= -1.0
        sig = sig.copy()
        sig[-1] *= -1.0
    r = u @ vt                                                             # (k, k)
    norm = float(np.sum(xc * xc))
    s = float(sig.sum() / norm) if norm > 0 else 0.0
    return Similarity(r, s, my - s * (mx @ r))


def procrustes_layouts(maps: Sequence[np.ndarray], reference: int
                       ) -> Tuple[np.ndarray, Tuple[float, ...]]:
    """Every ``(N, 2)`` map of ``maps`` moved onto ``maps[reference]``; ``(L, N, 2)`` float32 and
    the residuals (RMS distance left / RMS spread of the reference)."""
    ref = np.asarray(maps[reference], np.float64)
    spread = float(np.sqrt(np.mean(np.sum((ref - ref.mean(0)) ** 2, axis=1)))) or 1.0
    out, res = [], []
    for k, m in enumerate(maps):
        moved = ref if k == reference else procrustes(m, ref).apply(m)
        out.append(moved)
        res.append(float(np.sqrt(np.mean(np.sum((moved - ref) ** 2, axis=1)))) / spread)
    return np.stack(out).astype(np.float32), tuple(res)


# ---- the two methods -------------------------------------------------------------------------
def align_layers(activations: Sequence[np.ndarray], tokens: TokenSet,
                 layers: Sequence[AlignedLayer], method: AlignMethod,
                 params: UmapParams = UmapParams(), base: str = "pca", reference: int = -1,
                 regularisation: float = ALIGNMENT_REGULARISATION,
                 projector: Optional[Projector] = None, checksum: str = "",
                 state: Optional[TaskState] = None) -> AlignedLayouts:
    """The layouts of ``tokens`` at ``layers`` in one frame.

    Parameters
    ----------
    activations : ``activations[s]`` is the ``(L+1, n_s, D)`` array of sentence ``s``
    method : AlignedUMAP or Procrustes
    params : UMAP settings (the per-layer UMAP of Procrustes; AlignedUMAP's neighbours, min_dist,
        seed and epochs — 200 when ``params.n_epochs`` is None, umap-learn's default)
    base : Procrustes only: each layer's own map, "pca" or "umap"
    reference : Procrustes only: the index into ``layers`` of the layer the others are moved
        onto (negative: from the end; default the last)
    regularisation : AlignedUMAP only: the penalty on a token's move between layers
    projector : the cache for the per-layer maps of Procrustes (a new one when None)

    Progress is reported per layer (and per epoch inside UMAP fits); cancel is honoured between
    layers and epochs.
    """
    layers = tuple(layers)
    if len(layers) < 2:
        raise InputError(f"a trajectory needs at least two layers, got {len(layers)}")
    if len(tokens) < 3:
        raise InputError(f"only {len(tokens)} token(s): a trajectory needs at least 3")
    t0 = time.perf_counter()
    if method is AlignMethod.PROCRUSTES:
        if base not in ("pca", "umap"):
            raise InputError(f"Procrustes base must be 'pca' or 'umap', got {base!r}")
        ref = reference % len(layers) if -len(layers) <= reference < len(layers) else None
        if ref is None:
            raise InputError(f"reference layer {reference} is not one of the {len(layers)}")
        maps, fallback = _layer_maps(activations, tokens, layers, base, params,
                                     projector or Projector(), checksum, state)
        coords, res = procrustes_layouts(maps, ref)
        out_base, out_ref = base, ref
    else:
        coords = _aligned_umap(activations, tokens, layers, params, regularisation, state)
        res, out_base, out_ref, fallback = tuple(0.0 for _ in layers), "umap", None, []
    coords.setflags(write=False)
    report(state, 1, 1, "aligned layouts done")
    return AlignedLayouts(layers, coords, method, out_base, out_ref, res,
                          time.perf_counter() - t0, tuple(fallback))


def _layer_maps(activations, tokens: TokenSet, layers: Tuple[AlignedLayer, ...], base: str,
                params: UmapParams, projector: Projector, checksum: str,
                state: Optional[TaskState]) -> Tuple[List[np.ndarray], List[str]]:
    """Each layer's own 2-D map: the projector's (cached) map for a whole layer, PCA/UMAP of the
    half's features for a half; a layer with too few distinct vectors for UMAP gets its PCA map
    (the second value names those layers)."""
    from elmo_engine.analysis.projection import umapfit

    maps, fallback = [], []
    for k, layer in enumerate(layers):
        report(state, k, len(layers), f"{base.upper()} of {layer.name} ({len(tokens):,} tokens)")
        check(state)
        if layer.half is Half.BOTH:
            spec = LayerSpec.single(layer.index)
            p = None
            if base == "umap":
                try:
                    p = projector.umap(activations, tokens, spec, params, checksum, state)
                except InputError:                    # too few distinct vectors
                    fallback.append(layer.name)
            if p is None:
                p = projector.pca(activations, tokens, spec, checksum, params.pca_dims)
            maps.append(np.asarray(p.coords, np.float64))
            continue
        red = pca(aligned_features(activations, tokens, layer), params.pca_dims).coords
        two = red[:, :2] if red.shape[1] >= 2 else np.hstack([red, np.zeros_like(red)])
        if base == "umap":
            try:
                two = umapfit.umap_2d(red, params, state)
            except InputError:
                fallback.append(layer.name)
        maps.append(np.asarray(two, np.float64))
    return maps, fallback


def _aligned_umap(activations, tokens: TokenSet, layers: Tuple[AlignedLayer, ...],
                  params: UmapParams, regularisation: float, state: Optional[TaskState]
                  ) -> np.ndarray:
    """AlignedUMAP of the layers' PCA-reduced features, identity relations: ``(L, N, 2)``."""
    from elmo_engine.analysis.projection.umapfit import _quiet_third_party

    xs = []
    for k, layer in enumerate(layers):
        report(state, k, len(layers) + 1, f"PCA of {layer.name} for AlignedUMAP")
        check(state)
        x = pca(aligned_features(activations, tokens, layer), params.pca_dims).coords
        distinct = len(np.unique(x, axis=0))
        if distinct < MIN_UMAP_POINTS:
            raise InputError(f"AlignedUMAP needs at least {MIN_UMAP_POINTS} distinct vectors per "
                             f"layer; {layer.name} has {distinct}")
        xs.append(np.ascontiguousarray(x, np.float32))                   # (N, pca_dims)
    n = len(tokens)
    k = min(params.n_neighbors, n - 1)
    with warnings.catch_warnings():
        _quiet_third_party()
        import umap
        model = umap.AlignedUMAP(
            n_neighbors=k, min_dist=params.min_dist, metric=params.metric,
            n_epochs=params.n_epochs or 200, random_state=params.random_state,
            alignment_regularisation=regularisation, alignment_window_size=len(layers))
        identity = {i: i for i in range(n)}
        with epoch_hook(state, f"AlignedUMAP of {len(layers)} layers"):
            emb = model.fit_transform(xs, relations=[identity] * (len(xs) - 1))
    out = np.stack([np.asarray(e, np.float64) for e in emb])             # (L, N, 2)
    return _fill_nan(out).astype(np.float32)


def _fill_nan(coords: np.ndarray) -> np.ndarray:
    """AlignedUMAP puts a token with no neighbour in its layer's graph at NaN: it takes its
    place in the nearest layer that has one (or the layer's centre)."""
    out = coords.copy()
    for k in range(out.shape[0]):
        bad = ~np.isfinite(out[k]).all(axis=1)
        if not bad.any():
            continue
        for j in sorted(range(out.shape[0]), key=lambda j: abs(j - k)):
            fix = bad & np.isfinite(coords[j]).all(axis=1)
            out[k][fix] = coords[j][fix]
            bad &= ~fix
        good = np.isfinite(out[k]).all(axis=1)
        out[k][bad] = out[k][good].mean(axis=0) if good.any() else 0.0
    return out


# ---- between layers --------------------------------------------------------------------------
def interpolate(coords: np.ndarray, t: float) -> np.ndarray:
    """The positions at ``t`` in ``[0, L-1]`` of aligned ``coords (L, N, 2)``: layer ``⌊t⌋``
    moved linearly towards layer ``⌊t⌋+1`` by the fraction ``t - ⌊t⌋``; ``(N, 2)`` float32."""
    n_layers = coords.shape[0]
    t = min(max(float(t), 0.0), float(n_layers - 1))
    i = min(int(np.floor(t)), n_layers - 2) if n_layers > 1 else 0
    f = np.float32(t - i)
    if n_layers == 1 or f == 0:
        return np.array(coords[i], np.float32)
    return (coords[i] + f * (coords[i + 1] - coords[i])).astype(np.float32)   # (N, 2)
