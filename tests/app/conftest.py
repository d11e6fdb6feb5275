"""Fixtures of the app's tests (the session-wide ones — the tiny checkpoint, the settings folder,
one torch thread — are in ``tests/conftest.py``; small builders in ``app_helpers.py``).

Every test here must leave no window alive: :func:`no_widgets_left` checks, after the test's
own fixtures (``qtbot.addWidget`` closes and deletes what it was given), that no new top-level
widget is visible and no main window or dialog still exists (pyqtgraph's hidden parentless
context menus are its own and are not counted).
"""
from __future__ import annotations

import gc

import pytest


pytest.importorskip("pytestqt")


@pytest.fixture(autouse=True)
def no_widgets_left():
    """After the test (and its fixtures): no new visible top-level widget, no window alive."""
    from PySide6.QtCore import QCoreApplication, QEvent
    from PySide6.QtWidgets import QApplication, QDialog, QMainWindow

    from shiboken6 import getCppPointer

    def alive(app):
        return {getCppPointer(w)[0]: w for w in app.topLevelWidgets()}

    app = QApplication.instance()
    before = set(alive(app)) if app is not None else set()
    yield
    app = QApplication.instance()
    if app is None:
        return
    for _ in range(3):          # deleteLater() of closed windows, then what their deletion freed
        QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
        gc.collect()
    left = [f"{type(w).__name__}({w.objectName()!r}, visible={w.isVisible()})"
            for ptr, w in alive(app).items() if ptr not in before
            and (w.isVisible() or isinstance(w, (QMainWindow, QDialog)))]
    assert left == [], f"the test left top-level widgets alive: {left}"


@pytest.fixture
def workspace(qtbot):
    """A workspace without a model; its worker is stopped after the test."""
    from elmo_explorer.state.workspace import Workspace

    w = Workspace()
    yield w
    assert w.worker.shutdown(timeout_s=10)


@pytest.fixture
def ws(qtbot, tiny_checkpoint):
    """A workspace with the tiny checkpoint loaded (no sentences); stopped after the test."""
    from elmo_explorer.state.workspace import ModelSpec, Workspace

    w = Workspace()
    with qtbot.waitSignal(w.model_changed, timeout=60000):
        w.load_model(ModelSpec(str(tiny_checkpoint), device="cpu"))
    yield w
    assert w.worker.shutdown(timeout_s=60)
