"""The trajectory animation's frames, drawn and written (issue 42): the aligned layouts of the
layers morphing from one to the next, as a GIF (or MP4) and as PNG frames.

Frames are drawn with matplotlib's Agg backend (as every exported figure of the app) and written
with ``imageio`` (its Pillow plugin writes GIF; MP4 needs the optional ``imageio-ffmpeg``). What
to draw — each frame's positions and title — comes from
:func:`elmo_engine.analysis.projection.animation.render_frames`, which moves the points linearly
between consecutive layers. Selected tokens get their trail (a line through their aligned
positions at every layer) and their word. Every file is written atomically.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence

import numpy as np

from elmo_engine.atomic import atomic_path
from elmo_engine.errors import InputError
from elmo_engine.progress import TaskState, check, report

@dataclass(frozen=True)
class AnimationSpec:
    """How to draw the animation.

    Attributes
    ----------
    steps : frames from one layer to the next (the last layer adds one frame)
    fps : frames per second of the GIF/MP4
    width, height : frame size in pixels
    trails : indices of the tokens whose trails and words are drawn
    trail_labels : the text beside each trailed token (default its word)
    codes : ``(N,)`` colour code per token (−1: grey), or None (one colour)
    palette : the colours of codes 0, 1, … ('#rrggbb'; codes beyond it are grey), or None:
        matplotlib's tab10
    legend : the names of codes 0, 1, … shown in a legend (empty: no legend)
    point_size : marker area in points²
    """

    steps: int = 12
    fps: float = 12.0
    width: int = 800
    height: int = 600
    trails: Sequence[int] = ()
    trail_labels: Optional[Sequence[str]] = None
    codes: Optional[np.ndarray] = None
    palette: Optional[Sequence[str]] = None
    legend: Sequence[str] = ()
    point_size: float = 6.0

    def __post_init__(self) -> None:
        if not 1 <= self.steps <= 200:
            raise InputError(f"steps must be in 1..200, got {self.steps}")
        if not 0.5 <= self.fps <= 60:
            raise InputError(f"fps must be in 0.5..60, got {self.fps}")
        if self.trail_labels is not None and len(self.trail_labels) != len(self.trails):
            raise InputError(f"{len(self.trail_labels)} trail labels for {len(self.trails)} "
                             "trails")
        if not (64 <= self.width <= 4096 and 64 <= self.height <= 4096):
            raise InputError(f"frame size must be 64..4096 px, got {self.width}×{self.height}")

    def n_frames(self, n_layers: int) -> int:
        return (n_layers - 1) * self.steps + 1


def _limits(coords: np.ndarray) -> tuple:
    """Axis limits that hold every layer's points, with a 5% margin."""
    flat = coords.reshape(-1, 2)
    lo, hi = flat.min(axis=0), flat.max(axis=0)
    pad = np.maximum((hi - lo) * 0.06, 1e-6)
    # room on the right for the trailed tokens' words
    return (lo[0] - pad[0], hi[0] + 2.5 * pad[0]), (lo[1] - pad[1], hi[1] + pad[1])


def draw_frames(coords: np.ndarray, positions: Sequence[np.ndarray], titles: Sequence[str],
                words: Sequence[str], spec: AnimationSpec = AnimationSpec(),
                state: Optional[TaskState] = None) -> List[np.ndarray]:
    """Each frame ``(height, width, 3)`` uint8 RGB: the points at ``positions[f]`` ``(N, 2)``
    under ``titles[f]``, the trails through every layer's ``coords (L, N, 2)``."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    coords = np.asarray(coords, np.float32)                               # (L, N, 2)
    n = coords.shape[1]
    if len(words) != n:
        raise InputError(f"{len(words)} words for {n} points")
    named = list(zip(spec.trails, spec.trail_labels or [words[int(i)] if 0 <= int(i) < n else ""
                                                         for i in spec.trails]))
    trails = [(int(i), text) for i, text in named if 0 <= int(i) < n]
    if spec.codes is not None and len(spec.codes) != n:
        raise InputError(f"{len(spec.codes)} colour codes for {n} points")
    colours = _colours(spec.codes, n, spec.palette)                        # (N, 4)
    xlim, ylim = _limits(coords)
    dpi = 100
    fig = Figure(figsize=(spec.width / dpi, spec.height / dpi), dpi=dpi)
    canvas = FigureCanvasAgg(fig)
    ax = fig.add_axes((0.02, 0.02, 0.96, 0.9))
    frames = []
    for f, (pos, title) in enumerate(zip(positions, titles)):
        check(state)
        report(state, f, len(titles), f"drawing frame {f + 1}/{len(titles)}")
        ax.clear()
        ax.set_xlim(*xlim)
        ax.set_ylim(*ylim)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.scatter(pos[:, 0], pos[:, 1], s=spec.point_size, c=colours, linewidths=0)
        for i, text in trails:
            ax.plot(coords[:, i, 0], coords[:, i, 1], "-", color="0.25", lw=0.8, alpha=0.6)
            ax.plot(coords[:, i, 0], coords[:, i, 1], "o", color="0.25", ms=2.5, alpha=0.6)
            ax.plot([pos[i, 0]], [pos[i, 1]], "o", mfc=colours[i], mec="black", ms=7, mew=1.0)
            ax.annotate(text, (float(pos[i, 0]), float(pos[i, 1])), xytext=(5, 4),
                        textcoords="offset points", fontsize=9)
        if spec.legend:
            from matplotlib.lines import Line2D

            pal = _colours(np.arange(len(spec.legend)), len(spec.legend), spec.palette)
            ax.legend(handles=[Line2D([], [], ls="", marker="o", mfc=c, mec=c, label=name)
                               for name, c in zip(spec.legend, pal)],
                      loc="lower left", fontsize=8, framealpha=0.8)
        fig.suptitle(title, fontsize=11, y=0.97)
        canvas.draw()
        rgba = np.asarray(canvas.buffer_rgba())                            # (H, W, 4)
        frames.append(np.ascontiguousarray(rgba[..., :3]))
    return frames


def _colours(codes: Optional[np.ndarray], n: int, palette: Optional[Sequence[str]] = None
             ) -> np.ndarray:
    """``(N, 4)`` RGBA: ``palette`` (default matplotlib's tab10) by code, grey for −1 or a code
    beyond the palette; one blue without codes."""
    from matplotlib import colormaps
    from matplotlib.colors import ListedColormap

    out = np.tile(np.array([0.45, 0.45, 0.5, 0.7]), (n, 1))
    if codes is None:
        out[:] = (0.12, 0.47, 0.71, 0.7)
        return out
    codes = np.asarray(codes, np.int64)
    cmap = colormaps["tab10"] if palette is None else ListedColormap(list(palette))
    ok = (codes >= 0) & (codes < cmap.N)
    out[ok] = cmap(codes[ok])                            # a ListedColormap: by index
    out[ok, 3] = 0.8
    return out


def write_animation(path, frames: Sequence[np.ndarray], fps: float) -> Path:
    """Write ``frames`` as a looping GIF (``.gif``) or an MP4 (``.mp4``, needs
    ``imageio-ffmpeg``), atomically."""
    import imageio.v3 as iio

    path = Path(path)
    ext = path.suffix.lower()
    if not frames:
        raise InputError("no frames to write", path=path)
    if ext == ".gif":
        with atomic_path(path) as tmp:
            iio.imwrite(tmp, np.stack(frames), extension=".gif", duration=1000.0 / fps, loop=0)
        return path
    if ext == ".mp4":
        try:
            import imageio_ffmpeg  # noqa: F401
        except ImportError:
            raise InputError("MP4 needs the imageio-ffmpeg package (pip install imageio-ffmpeg); "
                             "write a .gif instead", path=path) from None
        with atomic_path(path) as tmp:
            iio.imwrite(tmp, np.stack(frames), extension=".mp4", fps=fps)
        return path
    raise InputError(f"an animation is written as .gif or .mp4, not {ext or 'no extension'!r}",
                     path=path)


#: the kind of folder the frames are written as (its marker, :data:`elmo_engine.io.writing.MARKER`)
FRAMES_KIND = "frames"


def write_frames_folder(folder, frames: Sequence[np.ndarray], overwrite: bool) -> List[Path]:
    """The frames as ``folder/frame_0000.png`` …, a folder output: written into a staging folder
    beside it, then renamed into place as a whole. An existing ``folder`` is refused without
    ``overwrite``, and with it unless it is empty or holds only frames written earlier (its
    marker lists them), before any frame is written. An interrupted write leaves the old folder
    as it was. The paths."""
    import shutil

    from elmo_engine.io.writing import check_replaceable, staging_folder, swap_in_folder

    folder = Path(folder)
    check_replaceable(folder, FRAMES_KIND, overwrite)
    staging = staging_folder(folder)
    try:
        names = [p.name for p in write_frames(staging, frames)]
        swap_in_folder(staging, folder, overwrite, FRAMES_KIND)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return [folder / n for n in names]


def write_frames(folder, frames: Sequence[np.ndarray], prefix: str = "frame_") -> List[Path]:
    """Write every frame as ``<folder>/<prefix>0000.png`` …, atomically; the paths."""
    import imageio.v3 as iio

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for k, frame in enumerate(frames):
        p = folder / f"{prefix}{k:04d}.png"
        with atomic_path(p) as tmp:
            iio.imwrite(tmp, frame, extension=".png")
        out.append(p)
    return out
