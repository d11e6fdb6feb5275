"""The trajectories tab's widgets: the choices, the morphing map with its slider and play button,
the trails, and the list of the tokens whose neighbourhood changes most (issue 42).

:class:`TrajectoryView` only draws what it is given; the panel
(:class:`~elmo_explorer.views.projection.trajectory_panel.TrajectoryPanel`) computes. The map is
one ``ScatterPlotItem`` in pixel mode with shared brushes: moving the slider only calls
``setData`` with the interpolated positions (``benchmarks/bench_trajectories.py`` measures it).
"""
from __future__ import annotations

from typing import List, Optional, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush
from PySide6.QtWidgets import (QAbstractItemView, QComboBox, QGridLayout, QHBoxLayout,
                               QHeaderView, QLabel, QLineEdit, QPushButton, QSlider, QSpinBox,
                               QSplitter, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget)

from elmo_engine.analysis.projection.knn_change import KnnChanges
from elmo_explorer.views.palette import OTHER_COLOUR, PALETTE
from elmo_explorer.views.projection.trajectory_model import K_DEFAULT, K_RANGE, METHODS

POINT_SIZE = 5
TRAIL_COLOUR = "#202020"


class TrajectoryMap(pg.PlotWidget):
    """The points at one position between layers, the trails and the trailed tokens' words.

    Signals
    -------
    point_clicked(int) : the index of the point clicked (-1: empty space)
    hovered(int) : the point under the mouse (-1: none)
    """

    point_clicked = Signal(int)
    hovered = Signal(int)

    def __init__(self, parent=None):
        super().__init__(parent, background="w")
        item = self.getPlotItem()
        item.showAxes(True, showValues=False)
        item.setAspectLocked(True)
        self.points = pg.ScatterPlotItem(pxMode=True, size=POINT_SIZE, pen=None, antialias=False)
        self.trails = pg.PlotDataItem(pen=pg.mkPen(TRAIL_COLOUR, width=1.2), connect="finite")
        self.stops = pg.ScatterPlotItem(pxMode=True, size=4, pen=None,
                                        brush=pg.mkBrush(TRAIL_COLOUR))
        self.heads = pg.ScatterPlotItem(pxMode=True, size=POINT_SIZE + 8, brush=None,
                                        pen=pg.mkPen("#000000", width=1.6))
        for z, it in enumerate((self.points, self.trails, self.stops, self.heads)):
            it.setZValue(z)
            self.addItem(it)
        self.labels: List[pg.TextItem] = []
        self.coords: Optional[np.ndarray] = None                 # (N, 2) drawn now
        self.brushes: Sequence[QBrush] = ()
        self._styled = -1                                        # points styled by setData
        self._palette = [pg.mkBrush(c) for c in PALETTE] + [pg.mkBrush(OTHER_COLOUR)]
        self.scene().sigMouseClicked.connect(self._clicked)
        self.scene().sigMouseMoved.connect(self._moved)

    def set_codes(self, codes: Optional[np.ndarray], n: int) -> None:
        """Colour point i with palette entry ``codes[i]`` (None: one colour)."""
        if codes is None or len(codes) != n:
            self.brushes = [self._palette[0]] * n
        else:
            c = np.minimum(np.asarray(codes, np.int64), len(PALETTE))
            self.brushes = [self._palette[k] for k in c.tolist()]
        self._styled = -1

    def set_points(self, coords: np.ndarray) -> None:
        """Move the points to ``coords (N, 2)``.

        The first call (or one after new colours) sets every point's brush with ``setData``;
        later calls only write the positions into the item's point table and invalidate its
        bounds and picture, as ``setData`` does, without recomputing the unchanged styles (what
        keeps the slider smooth at 20,000 points)."""
        self.coords = coords = np.asarray(coords, np.float64)
        item = self.points
        if self._styled != len(coords) or len(item.data) != len(coords):
            item.setData(x=coords[:, 0], y=coords[:, 1], brush=self.brushes)
            self._styled = len(coords)
            return
        item.data["x"] = coords[:, 0]
        item.data["y"] = coords[:, 1]
        item.prepareGeometryChange()
        item.informViewBoundsChanged()
        item.bounds = [None, None]
        item.invalidate()

    def set_trails(self, paths: Sequence[np.ndarray], heads: np.ndarray,
                   words: Sequence[str]) -> None:
        """Trails ``paths`` (one ``(L, 2)`` each), the tokens now at ``heads (n, 2)``."""
        paths = [np.asarray(p, np.float64) for p in paths]
        heads = np.asarray(heads, np.float64).reshape(-1, 2)
        if paths:
            gap = np.full((1, 2), np.nan)
            line = np.vstack([np.vstack([p, gap]) for p in paths])
            self.trails.setData(line[:, 0], line[:, 1])
            stops = np.vstack(paths)
            self.stops.setData(x=stops[:, 0], y=stops[:, 1])
        else:
            self.trails.setData([], [])
            self.stops.setData(x=[], y=[])
        self.heads.setData(x=heads[:, 0] if len(heads) else [],
                           y=heads[:, 1] if len(heads) else [])
        while len(self.labels) > len(words):
            self.removeItem(self.labels.pop())
        while len(self.labels) < len(words):
            t = pg.TextItem("", color="#000000", anchor=(-0.15, 0.9))
            t.setZValue(10)
            self.addItem(t)
            self.labels.append(t)
        for t, w, (x, y) in zip(self.labels, words, heads):
            t.setText(w)
            t.setPos(float(x), float(y))

    def fit(self, coords: np.ndarray) -> None:
        """Show every layer's points: ``coords (L, N, 2)``."""
        flat = np.asarray(coords, np.float64).reshape(-1, 2)
        lo, hi = flat.min(axis=0), flat.max(axis=0)
        self.getPlotItem().getViewBox().setRange(xRange=(float(lo[0]), float(hi[0])),
                                                 yRange=(float(lo[1]), float(hi[1])),
                                                 padding=0.04)

    def nearest(self, scene_pos, radius_px: float = 8.0) -> int:
        if self.coords is None or not len(self.coords):
            return -1
        vb = self.getPlotItem().getViewBox()
        p = vb.mapSceneToView(scene_pos)
        px, py = vb.viewPixelSize()
        if not px or not py:
            return -1
        d2 = ((self.coords[:, 0] - p.x()) / px) ** 2 + ((self.coords[:, 1] - p.y()) / py) ** 2
        i = int(np.argmin(d2))
        return i if d2[i] <= radius_px ** 2 else -1

    def _clicked(self, ev) -> None:
        self.point_clicked.emit(self.nearest(ev.scenePos()))

    def _moved(self, pos) -> None:
        self.hovered.emit(self.nearest(pos))


class TrajectoryView(QWidget):
    """The widgets of the trajectories tab."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.method = QComboBox()
        for m in METHODS:
            self.method.addItem(m.label)
        self.sequence = QComboBox()
        self.reference = QComboBox()
        self.reference.setToolTip("Procrustes: the layer the others are moved onto")
        self.k = QSpinBox()
        self.k.setRange(*K_RANGE)
        self.k.setValue(K_DEFAULT)
        self.k.setPrefix("k = ")
        self.k.setToolTip("neighbours compared between the two layers (Jaccard of the k-NN sets "
                          "in the full vectors)")
        self.compute = QPushButton("Compute")
        self.cancel = QPushButton("Cancel")
        self.cancel.setEnabled(False)
        top = QHBoxLayout()
        for w in (QLabel("Align"), self.method, self.sequence, QLabel("onto"), self.reference,
                  self.k, self.compute, self.cancel):
            top.addWidget(w)
        top.addStretch(1)

        self.map = TrajectoryMap()
        self.play = QPushButton("Play")
        self.play.setCheckable(True)
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.where = QLabel("")
        self.export_gif = QPushButton("Export GIF…")
        self.export_frames = QPushButton("Export frames…")
        self.slider.setMinimumWidth(160)
        bar = QHBoxLayout()
        bar.addWidget(self.play)
        bar.addWidget(self.slider, 1)
        bar2 = QHBoxLayout()
        bar2.addWidget(self.where, 1)
        bar2.addWidget(self.export_gif)
        bar2.addWidget(self.export_frames)
        left = QWidget()
        lv = QVBoxLayout(left)
        lv.setContentsMargins(0, 0, 0, 0)
        lv.addWidget(self.map, 1)
        lv.addLayout(bar)
        lv.addLayout(bar2)

        self.trail_word = QLineEdit()
        self.trail_word.setPlaceholderText("trail a word's tokens, e.g. bank")
        self.clear_trails = QPushButton("Clear trails")
        self.pair_a, self.pair_b = QComboBox(), QComboBox()
        self.changes = QTableWidget(0, 3)
        self.changes.setHorizontalHeaderLabels(["Jaccard", "token", "in context"])
        self.changes.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.changes.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.changes.verticalHeader().setVisible(False)
        head = self.changes.horizontalHeader()
        head.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        head.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        head.setStretchLastSection(True)
        self.changes_title = QLabel("Tokens whose neighbourhood changes most")
        self.changes_title.setWordWrap(True)
        right = QWidget()
        grid = QGridLayout(right)
        grid.setContentsMargins(4, 0, 0, 0)
        grid.addWidget(self.trail_word, 0, 0, 1, 3)
        grid.addWidget(self.clear_trails, 0, 3)
        grid.addWidget(QLabel("from"), 1, 0)
        grid.addWidget(self.pair_a, 1, 1)
        grid.addWidget(QLabel("to"), 1, 2)
        grid.addWidget(self.pair_b, 1, 3)
        grid.addWidget(self.changes_title, 2, 0, 1, 4)
        grid.addWidget(self.changes, 3, 0, 1, 4)
        grid.setRowStretch(3, 1)

        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(left)
        split.addWidget(right)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        split.setSizes([780, 460])
        self.note = QLabel("Project tokens in the Maps tab, then press Compute.")
        self.note.setWordWrap(True)
        self.note.setTextFormat(Qt.TextFormat.PlainText)
        self.status = QLabel("")
        self.status.setTextFormat(Qt.TextFormat.PlainText)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 4, 0, 0)
        lay.addLayout(top)
        lay.addWidget(split, 1)
        lay.addWidget(self.note)
        lay.addWidget(self.status)
        self.set_playable(False)

    def set_sequences(self, names: Sequence[str]) -> None:
        keep = self.sequence.currentIndex()
        self.sequence.blockSignals(True)
        self.sequence.clear()
        self.sequence.addItems(list(names))
        self.sequence.setCurrentIndex(keep if 0 <= keep < len(names) else 0)
        self.sequence.blockSignals(False)

    def set_layer_names(self, names: Sequence[str]) -> None:
        """The layers of the chosen sequence: the reference and the pair boxes."""
        # the pair: the first contextual layer and the last (layer 0 gives every occurrence of a
        # word one vector, so its neighbour sets are ties among a word's repeats)
        first = 1 if len(names) > 2 else 0
        for box, default in ((self.reference, len(names) - 1), (self.pair_a, first),
                             (self.pair_b, len(names) - 1)):
            box.blockSignals(True)
            box.clear()
            box.addItems(list(names))
            box.setCurrentIndex(max(0, default))
            box.blockSignals(False)

    def set_running(self, running: bool) -> None:
        self.compute.setEnabled(not running)
        self.cancel.setEnabled(running)

    def set_playable(self, playable: bool) -> None:
        for w in (self.play, self.slider, self.export_gif, self.export_frames):
            w.setEnabled(playable)

    def show_changes(self, changes: Optional[KnnChanges]) -> None:
        t = self.changes
        t.setRowCount(0)
        if changes is None:
            self.changes_title.setText("Tokens whose neighbourhood changes most")
            return
        self.changes_title.setText(
            f"Tokens whose {changes.k} nearest neighbours change most, {changes.a} → "
            f"{changes.b} (Jaccard of the k-NN sets in the vectors; mean {changes.mean:.2f}). "
            "Click a row for its trail.")
        t.setRowCount(len(changes.top))
        for r, c in enumerate(changes.top):
            tip = (f"lost: {', '.join(c.lost) or '—'}\ngained: {', '.join(c.gained) or '—'}")
            for col, text in enumerate((f"{c.jaccard:.2f}", c.word, c.context)):
                item = QTableWidgetItem(text)
                item.setToolTip(tip)
                item.setData(Qt.ItemDataRole.UserRole, c.index)
                t.setItem(r, col, item)
