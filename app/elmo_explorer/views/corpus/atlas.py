"""The corpus map's data, without Qt: 2-D coordinates per layer, colour categories, and what to
draw of them for a viewport.

Coordinates: PCA per layer (:func:`elmo_engine.analysis.projection.compute.pca`) fitted on an
even sample of at most :data:`PCA_SAMPLE` occurrences and applied to all of them — cheap enough
for 10^6 points, deterministic, and the same axes whatever the zoom. (UMAP would separate senses
more, but costs minutes at this size on two cores; the Projection view has it for small sets.)

Drawing (as Embedding Atlas does, Ren et al. 2025): when the viewport holds more than
:data:`POINTS_MAX` points the map is a density image binned at the viewport's resolution
(:func:`elmo_engine.io.figures.corpus.density_rgba`), recomputed on every zoom or pan; once it
holds fewer, the points inside it are drawn one by one.
"""
from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple

import numpy as np

from elmo_engine.analysis.projection.compute import pca
from elmo_engine.progress import TaskState, check
from elmo_explorer.common.selection import Rect, points_in_rect
from elmo_explorer.views.palette import OTHER_COLOUR, PALETTE

#: at most this many points in the viewport are drawn as points; more: the density image
POINTS_MAX = 20_000
#: the PCA of a layer is fitted on at most this many occurrences
PCA_SAMPLE = 20_000
#: rows projected per step (bounds the float32 copy of the vectors)
PROJECT_CHUNK = 65_536


class MapMode(enum.Enum):
    DENSITY = "density"
    POINTS = "points"


@dataclass
class MapData:
    """The map of one set of occurrences: the same rows in every layer, each layer's 2-D
    coordinates, one colour category per row (the same in every layer) and the legend."""

    title: str                                     # "bank" or "all tokens"
    rows: np.ndarray                               # (N,) the occurrences' rows in the index
    coords: dict                                   # layer → (N, 2) float32
    codes: np.ndarray                              # (N,) int32 into colours()
    legend: List[Tuple[str, str, int]] = field(default_factory=list)
    explained: dict = field(default_factory=dict)  # layer → share of variance of the 2 axes
    n_total: int = 0                               # occurrences before sampling

    @property
    def layers(self) -> List[int]:
        return sorted(self.coords)

    def colours(self) -> List[str]:
        return [c for _n, c, _k in self.legend] + [OTHER_COLOUR]

    def index_of_row(self, row: int) -> Optional[int]:
        hit = np.flatnonzero(self.rows == row)
        return int(hit[0]) if len(hit) else None


def categories(values: Sequence[str], max_colours: int = len(PALETTE)
               ) -> Tuple[np.ndarray, List[Tuple[str, str, int]]]:
    """Colour codes by frequency as the Projection view colours by word: the ``max_colours``
    commonest values get the palette in order, the rest share the grey last code."""
    counts = Counter(values)
    order = [v for v, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    top = order[:max_colours]
    index = {v: i for i, v in enumerate(top)}
    codes = np.fromiter((index.get(v, len(top)) for v in values), np.int32, len(values))
    legend = [(v, PALETTE[i], counts[v]) for i, v in enumerate(top)]
    return codes, legend


def project_layer(vectors: np.ndarray, rows: np.ndarray, seed: int = 0,
                  state: Optional[TaskState] = None) -> Tuple[np.ndarray, float]:
    """2-D PCA coordinates ``(N, 2)`` of ``vectors[rows]`` (fitted on an even sample of
    :data:`PCA_SAMPLE`), and the share of variance the two axes explain."""
    rows = np.asarray(rows, np.int64)
    n = len(rows)
    if n < 2:
        return np.zeros((n, 2), np.float32), 0.0
    fit_rows = rows
    if n > PCA_SAMPLE:
        pick = np.random.default_rng(seed).choice(n, PCA_SAMPLE, replace=False)
        fit_rows = rows[np.sort(pick)]
    fitted = pca(np.asarray(vectors[fit_rows], np.float32), 2)
    comps = fitted.components                                        # (k, D)
    out = np.zeros((n, 2), np.float32)
    for s in range(0, n, PROJECT_CHUNK):
        check(state)
        x = np.asarray(vectors[rows[s:s + PROJECT_CHUNK]], np.float32)   # (c, D)
        out[s:s + len(x), :comps.shape[0]] = (x - fitted.mean) @ comps.T
    return out, float(fitted.explained[:2].sum())


def bounds(coords: np.ndarray) -> Rect:
    """The data's extent with a 6 % margin (a degenerate axis gets a unit width)."""
    if len(coords) == 0:
        return (-1.0, -1.0, 1.0, 1.0)
    lo, hi = coords.min(0), coords.max(0)
    pad = np.where(hi - lo > 0, (hi - lo) * 0.06, 0.5)
    return (float(lo[0] - pad[0]), float(lo[1] - pad[1]), float(hi[0] + pad[0]),
            float(hi[1] + pad[1]))


def visible(coords: np.ndarray, rect: Rect) -> np.ndarray:
    """Indices of the points inside the viewport ``rect`` (the box selection's mask)."""
    return points_in_rect(coords, rect)


def mode_for(n_visible: int, points_max: int = POINTS_MAX) -> MapMode:
    return MapMode.POINTS if n_visible <= points_max else MapMode.DENSITY


def grid_shape(width_px: int, height_px: int, cell_px: int = 2, most: int = 600
               ) -> Tuple[int, int]:
    """Bins for a viewport of ``width_px`` × ``height_px``: one per ``cell_px`` pixels, at
    most ``most`` a side (rows, cols)."""
    return (max(8, min(most, height_px // cell_px)), max(8, min(most, width_px // cell_px)))


def synthetic_map(n: int, layers: Sequence[int] = (0, 1, 2), clusters: int = 5,
                  seed: int = 0) -> MapData:
    """``n`` points in ``clusters`` Gaussian blobs per layer (blobs tighter in higher layers),
    for tests and for measuring the map's drawing speed without an index."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, clusters, n)
    coords = {}
    for i, layer in enumerate(layers):
        centres = rng.normal(0, 4.0, (clusters, 2))
        coords[layer] = (centres[labels] + rng.normal(0, 1.5 / (1 + i), (n, 2))).astype(
            np.float32)
    codes, legend = categories([f"cluster {c}" for c in labels])
    return MapData("synthetic", np.arange(n, dtype=np.int64), coords, codes, legend,
                   n_total=n)
