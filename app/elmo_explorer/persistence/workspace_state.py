"""The analysis as a :class:`~elmo_engine.io.workspace_file.WorkspaceData`, and back.

:func:`collect` gathers the workspace (model, sentences, selection) and every panel's view
state and probe runs; :func:`restore` gives them back to the panels and the selection. Panels
are reached through the :class:`~elmo_explorer.views.protocol.AnalysisPanel` protocol; one
panel that fails is logged and skipped, never stops a save or an open. GUI thread, cheap.
"""
from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Callable, Iterable, Optional, Tuple, TypeVar

from elmo_engine.io import workspace_file as wf
from elmo_explorer.views.protocol import AnalysisPanel
from elmo_explorer.state.workspace import TokenRef, Workspace

log = logging.getLogger(__name__)

T = TypeVar("T")
Panels = Iterable[Tuple[str, AnalysisPanel]]


def guarded(panel: AnalysisPanel, what: str, fn: Callable[[], T], default: T) -> T:
    """``fn()``, or ``default`` (logged) when the panel fails: one panel's problem must not
    stop a save, an open or a report."""
    try:
        return fn()
    except Exception:
        log.exception("%s.%s failed", type(panel).__name__, what)
        return default


def collect(ws: Workspace, panels: Panels, source: Optional[Path]) -> wf.WorkspaceData:
    """The current analysis (``source``: the workspace file it was last saved to or opened)."""
    data = wf.WorkspaceData(sentences=list(ws.sentences), tokenization=ws.tokenization)
    if ws.model_spec is not None:
        info = ws.model_info
        data.checkpoint = wf.CheckpointRef(
            str(Path(ws.model_spec.path).resolve()), info.checksum if info else "",
            info.name if info else "", ws.model_spec.device, ws.model_spec.precision)
    if ws.selection is not None:
        ref = ws.selection
        data.selection = {"sentence": ref.sentence, "token": ref.token,
                          "word": ws.word_at(ref)}
    for name, panel in panels:
        state = guarded(panel, "view_state", panel.view_state, {})
        if isinstance(state, dict) and state:
            data.views[name] = state
        data.probe_runs.extend(guarded(panel, "probe_runs", panel.probe_runs, []))
    data.source = str(source) if source else ""
    return data


def fingerprint(data: wf.WorkspaceData) -> str:
    """A hash of what the user would lose (not when or where it was saved)."""
    obj = data.to_json()
    for key in ("saved_at", "session", "source"):
        obj.pop(key, None)
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


def restore(ws: Workspace, panels: Panels, data: wf.WorkspaceData) -> None:
    """Give the panels their saved view state and probe runs, then select the saved token
    when it is still the same word."""
    for name, panel in panels:
        if name in data.views:
            guarded(panel, "restore_view_state",
                    lambda p=panel: p.restore_view_state(data.views[name]), None)
        if data.probe_runs:
            guarded(panel, "restore_probe_runs",
                    lambda p=panel: p.restore_probe_runs(list(data.probe_runs)), None)
    sel = data.selection
    if sel is not None:
        ref = TokenRef(sel["sentence"], sel["token"])
        try:
            word = ws.word_at(ref)
        except IndexError:
            word = None
        if word is not None and (not sel.get("word") or sel["word"] == word):
            ws.select(ref)
