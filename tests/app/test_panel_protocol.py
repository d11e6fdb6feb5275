"""Every analysis view provides the AnalysisPanel protocol the window and the workspace actions
rely on, and is split into a model without Qt, a view and the panel (its controller)."""
from __future__ import annotations

import importlib

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import QCoreApplication, QEvent  # noqa: E402

from elmo_explorer.panels import VIEWS, load_panel_classes  # noqa: E402
from elmo_explorer.panels.projection import ProjectionPanel  # noqa: E402
from elmo_explorer.panels.protocol import AnalysisPanel  # noqa: E402
from elmo_explorer.workspace import Workspace  # noqa: E402

pytestmark = pytest.mark.gui


def test_every_view_is_an_analysis_panel_with_a_model_and_a_view(qtbot, monkeypatch):
    monkeypatch.setattr(ProjectionPanel, "_schedule_warm_up", lambda self: None)  # no compile
    classes, problems = load_panel_classes()
    assert problems == [] and [v for v, _ in classes] == list(VIEWS)
    ws = Workspace()
    panels = []
    try:
        for view, cls in classes:
            panel = cls(ws)
            panels.append(panel)
            assert isinstance(panel, AnalysisPanel), view
            assert isinstance(panel.title, str) and panel.title
            assert isinstance(panel.view_state(), dict) and isinstance(panel.probe_runs(), list)
            assert panel.report_tables() == [] or all(t.name for t in panel.report_tables())
            model_module = importlib.import_module(type(panel.model).__module__)
            assert not any(name.startswith("PySide6") for name in vars(model_module)
                           if isinstance(name, str)), view
            assert type(panel.model).__module__ == f"elmo_explorer.panels.{view}_model"
            assert type(panel.view).__module__ == f"elmo_explorer.panels.{view}_view"
    finally:
        for panel in panels:                 # gone before the workspace they observe
            panel.deleteLater()
        QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
        assert ws.worker.shutdown(timeout_s=10)
