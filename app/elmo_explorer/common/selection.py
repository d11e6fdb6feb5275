"""Box selection on a 2-D map, without Qt: which points lie inside a rectangle.

Shared by the map views (Projection, Corpus), whose Shift+drag draws the rectangle
(:class:`elmo_explorer.common.box_select.SelectViewBox`). One boolean mask over the coordinates,
no Python loop, so it stays interactive at 10^6 points.
"""
from __future__ import annotations

from typing import Tuple

import numpy as np

Rect = Tuple[float, float, float, float]           # x0, y0, x1, y1 (data coordinates)


def normalized(rect: Rect) -> Rect:
    """``rect`` with ``x0 <= x1`` and ``y0 <= y1`` (a box may be dragged in any direction)."""
    x0, y0, x1, y1 = (float(v) for v in rect)
    return (min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1))


def inside_mask(coords: np.ndarray, rect: Rect) -> np.ndarray:
    """``(N,)`` bool: which points of ``coords`` ``(N, 2)`` lie inside ``rect`` (edges
    included)."""
    x0, y0, x1, y1 = normalized(rect)
    x, y = coords[:, 0], coords[:, 1]
    return (x >= x0) & (x <= x1) & (y >= y0) & (y <= y1)


def points_in_rect(coords: np.ndarray, rect: Rect) -> np.ndarray:
    """The indices (ascending, int64) of the points of ``coords`` ``(N, 2)`` inside ``rect``."""
    if coords is None or len(coords) == 0:
        return np.zeros(0, np.int64)
    return np.flatnonzero(inside_mask(coords, rect)).astype(np.int64, copy=False)
