"""Shift+drag box selection for pyqtgraph plots, shared by the map views (Projection, Corpus).

:class:`SelectViewBox` draws pyqtgraph's rubber band while the left button is dragged with Shift
held (or always, in "select mode") and emits the finished box in data coordinates; a left click
emits its point. Which points the box holds is :func:`elmo_explorer.common.selection.
points_in_rect` (Qt-free).
"""
from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt, Signal

from elmo_explorer.common.selection import Rect


def rect_tuple(rect: QRectF) -> Rect:
    """``(x0, y0, x1, y1)`` of a QRectF (normalized: x0 <= x1, y0 <= y1)."""
    r = rect.normalized()
    return (r.left(), r.top(), r.right(), r.bottom())


class SelectViewBox(pg.ViewBox):
    """A ViewBox that box-selects on Shift+drag (or any left drag in select mode).

    Signals: ``box_selected(QRectF)`` in data coordinates, ``clicked(QPointF)`` (a left click,
    data coordinates)."""

    box_selected = Signal(object)
    clicked = Signal(object)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.select_mode = False

    def mouseDragEvent(self, ev, axis=None):
        shift = bool(ev.modifiers() & Qt.KeyboardModifier.ShiftModifier)
        if ev.button() != Qt.MouseButton.LeftButton or not (self.select_mode or shift):
            super().mouseDragEvent(ev, axis)
            return
        ev.accept()
        if ev.isFinish():
            self.rbScaleBox.hide()
            a, b = self.mapToView(ev.buttonDownPos()), self.mapToView(ev.pos())
            self.box_selected.emit(QRectF(a, b).normalized())
        else:
            self.updateScaleBox(ev.buttonDownPos(), ev.pos())

    def mouseClickEvent(self, ev):
        if ev.button() == Qt.MouseButton.LeftButton:
            ev.accept()
            self.clicked.emit(self.mapToView(ev.pos()))
        else:
            super().mouseClickEvent(ev)
