"""The projection view's widgets: the controls, the linked plots, the legend, the info line.

:class:`ProjectionView` only draws what it is given (projections, colour codes, messages); the
controller, :class:`~elmo_explorer.views.projection.controller.ProjectionPanel`, computes.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSplitter, QVBoxLayout, QWidget

from elmo_engine.analysis.projection import Projection
from elmo_explorer.views.projection.controls import LegendList, ProjectionControls
from elmo_explorer.views.projection.plots import ProjectionPlots


def plot_title(p: Projection) -> str:
    """``layer 1 · PCA (31% + 12%)`` or ``layer 1 · UMAP``."""
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

    def draw(self, k: int, p: Projection) -> None:
        self.plots.set_coords(k, p.coords, plot_title(p))

    def set_colours(self, codes: np.ndarray, legend: Sequence) -> None:
        self.plots.set_codes(codes)
        self.legend.set_entries(legend)

    def clear(self, message: str) -> None:
        self.plots.set_layers([])
        self.legend.set_entries([])
        self.message(message)
