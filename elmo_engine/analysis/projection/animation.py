"""The trajectory animation's frames, computed (issue 42): ``steps`` frames between consecutive
layers, the points moved linearly (:func:`~elmo_engine.analysis.projection.aligned.interpolate`),
``(L − 1) · steps + 1`` frames in all, each with its title; drawn and written by
:mod:`elmo_engine.io.figures.trajectories` (matplotlib and imageio live there, as every figure).
"""
from __future__ import annotations

from typing import List, Optional, Sequence

import numpy as np

from elmo_engine.analysis.projection.aligned import AlignedLayouts, interpolate
# the drawing spec and the writers, importable from here too
from elmo_engine.io.figures.trajectories import (AnimationSpec, draw_frames,  # noqa: F401
                                                 write_animation, write_frames,
                                                 write_frames_folder)
from elmo_engine.progress import TaskState


def frame_times(n_layers: int, steps: int) -> np.ndarray:
    """The positions ``t`` in ``[0, n_layers − 1]`` of the frames: ``((L−1)·steps + 1,)``."""
    return np.linspace(0.0, n_layers - 1, (n_layers - 1) * steps + 1)


def render_frames(layouts: AlignedLayouts, words: Sequence[str], spec: AnimationSpec = AnimationSpec(),
                  state: Optional[TaskState] = None) -> List[np.ndarray]:
    """The animation's frames: each ``(height, width, 3)`` uint8 RGB."""
    coords = np.asarray(layouts.coords, np.float32)                       # (L, N, 2)
    times = frame_times(coords.shape[0], spec.steps)
    positions = [interpolate(coords, float(t)) for t in times]            # (N, 2) each
    return draw_frames(coords, positions, [_title(layouts, float(t)) for t in times], words,
                       spec, state)


def _title(layouts: AlignedLayouts, t: float) -> str:
    names = [lay.name for lay in layouts.layers]
    i = min(int(np.floor(t)), len(names) - 1)
    frac = t - i
    how = ("AlignedUMAP" if layouts.base == "umap" and layouts.reference is None
           else f"{layouts.base.upper()} + Procrustes to {names[layouts.reference or 0]}")
    where = names[i] if frac < 1e-9 else f"{names[i]} → {names[i + 1]} ({100 * frac:.0f}%)"
    return f"{where} · {how}"
