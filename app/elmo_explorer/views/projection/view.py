"""The projection view's widgets: the controls, the linked plots, the legend, the info line.

:class:`ProjectionView` only draws what it is given (projections, colour codes, messages); the
controller, :class:`~elmo_explorer.views.projection.controller.ProjectionPanel`, computes.
"""
from __future__ import annotations

from typing import Callable, Dict, Optional, Sequence

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSplitter, QVBoxLayout, QWidget

from elmo_engine.analysis.projection import LayerSpec, Projection, TokenSet, collapsed_note
from elmo_explorer.views.projection.controls import LegendList, ProjectionControls
from elmo_explorer.views.projection.plots import ProjectionPlots


def describe(tokens: TokenSet, layers: Sequence[LayerSpec], i: int, k: int = -1) -> str:
    """Point ``i`` (of plot ``k``) in words: layer, token, label, its sentence."""
    where = f"{layers[k].name} · " if 0 <= k < len(layers) else ""
    label = f" · {tokens.label_of(i)}" if tokens.label_of(i) else ""
    return (f"{where}'{tokens.words[i]}'{label} · sentence {int(tokens.sentence[i]) + 1}: "
            f"{tokens.context(i, 12)}")


def plot_title(p: Projection, collapsed: bool = False) -> str:
    """``layer 1 · PCA (31% + 12%)`` or ``layer 1 · UMAP``; a layer whose tokens fall on a few
    points (``collapsed``: its plot shows the note of
    :func:`~elmo_engine.analysis.projection.collapsed_note`, not two dots) says so
    (``layer 0 · context-free``)."""
    if collapsed:
        return f"{p.layer.name} · context-free" if p.layer.index == 0 else p.layer.name
    if p.method == "pca":
        ex = p.explained or (0.0, 0.0)
        return f"{p.layer.name} · PCA ({100 * ex[0]:.0f}% + {100 * ex[1]:.0f}%)"
    return f"{p.layer.name} · UMAP"


class ProjectionView(QWidget):
    """The widgets of the projection view."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.controls = ProjectionControls(self)
        self.plots = ProjectionPlots(self)
        self.legend = LegendList(self)
        self.titles: Dict[int, str] = {}              # plot → its first title line
        self.info = QLabel("Hover a point to see its token in context; Shift+drag to select.")
        self.info.setWordWrap(True)
        self.info.setTextFormat(Qt.TextFormat.PlainText)
        self.info.setMinimumHeight(self.info.fontMetrics().height() * 2 + 4)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self.plots)
        split.addWidget(self.legend)
        split.setStretchFactor(0, 1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.controls)
        lay.addWidget(split, 1)
        bottom = QHBoxLayout()
        bottom.setContentsMargins(4, 0, 4, 2)
        bottom.addWidget(self.info, 3)
        bottom.addWidget(self.controls.status, 2)
        self.controls.status.setAlignment(Qt.AlignmentFlag.AlignRight
                                          | Qt.AlignmentFlag.AlignVCenter)
        lay.addLayout(bottom)

    def message(self, text: str) -> None:
        self.controls.status.setText(text)

    def draw(self, k: int, p: Projection, words: Sequence[str] = ()) -> bool:
        """Plot ``k`` shows ``p``: its map, or the note that replaces a map of a few points
        (``words``: the tokens' spellings, named in the note); whether it is a note."""
        note = collapsed_note(p, words)
        self.titles[k] = plot_title(p, note is not None)
        self.plots.set_coords(k, p.coords, self.titles[k], note)
        return note is not None

    def set_caption(self, k: int, caption: str) -> None:
        """Plot ``k``'s second title line: how faithful its map is (issue 42)."""
        if k < len(self.plots.plots):
            title = self.titles.get(k, "")
            self.plots.plots[k].set_title(f"{title}\n{caption}" if caption else title)

    def set_colours(self, codes: np.ndarray, legend: Sequence) -> None:
        self.plots.set_codes(codes)
        self.legend.set_entries(legend)

    def clear(self, message: str) -> None:
        self.plots.set_layers([])
        self.legend.set_entries([])
        self.message(message)

    # ---- linked interaction: what the plots and the info line show ---------------------------
    def show_search(self, tokens: Optional[TokenSet], text: str) -> np.ndarray:
        """Mark every point whose token is ``text`` (case-insensitive) in all plots."""
        text = text.strip()
        hits = tokens.find(text) if (tokens is not None and text) else np.zeros(0, int)
        self.plots.set_highlight(hits)
        if text and tokens is not None:
            self.info.setText(f"'{text}': {len(hits):,} of {len(tokens):,} tokens")
        return hits

    def show_selection(self, tokens: TokenSet, idx: np.ndarray) -> None:
        words = sorted({tokens.words[i] for i in idx.tolist()})
        more = "…" if len(words) > 12 else ""
        self.info.setText(f"{len(idx):,} tokens selected: {', '.join(words[:12])}{more}")

    def add_plot_menus(self, export_plot: Callable[[int], None],
                       export_vectors: Callable[[int], None]) -> None:
        """Per-plot entries in each plot's right-click menu (``k``: the plot)."""
        for k, lp in enumerate(self.plots.plots):
            menu = lp.view.menu
            menu.addSeparator()
            menu.addAction("Export this plot (PNG/SVG/PDF)…").triggered.connect(
                lambda _c=False, k=k: export_plot(k))
            menu.addAction("Export this layer's vectors for TensorBoard…").triggered.connect(
                lambda _c=False, k=k: export_vectors(k))
