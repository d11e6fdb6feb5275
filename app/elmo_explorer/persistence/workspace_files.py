"""Save and open workspace files: on the worker, with the questions a workspace can raise.

Opening asks where a moved checkpoint is and warns when its checksum differs; the restore waits
until the workspace's model is loaded and its sentences are embedded. Quitting asks to save work
that would otherwise be lost. Used by :class:`elmo_explorer.persistence.workspace_actions.WorkspaceActions`.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

from PySide6.QtWidgets import QFileDialog, QMessageBox

from elmo_engine.errors import ElmoError
from elmo_engine.io import workspace_file as wf
from elmo_explorer.persistence import workspace_state
from elmo_explorer.state.workspace import ModelSpec

if TYPE_CHECKING:
    from elmo_explorer.persistence.workspace_actions import WorkspaceActions

WORKSPACE_FILTER = "ELMo Explorer workspace (*.elmows.json);;JSON (*.json);;All files (*)"


# ---- save ---------------------------------------------------------------------------------
def ask_workspace_path(actions: "WorkspaceActions") -> Optional[Path]:
    """Where to save the workspace (the workspace suffix added when missing); None if the
    dialog was cancelled."""
    start = str(actions.path) if actions.path else actions.window.settings.last_dir
    name, _ = QFileDialog.getSaveFileName(actions.window, "Save workspace", start, WORKSPACE_FILTER)
    if not name:
        return None
    path = Path(name)
    return path if path.name.endswith(".json") else path.with_name(path.name + wf.SUFFIX)


def save_workspace(actions: "WorkspaceActions", path) -> int:
    """Save the current analysis to ``path`` on the worker."""
    path = Path(path)
    data = actions.collect()
    data.source = ""
    fp = workspace_state.fingerprint(data)

    def done(_result) -> None:
        actions.path, actions.saved_fp = path, fp
        actions.window.settings.last_dir = str(path.parent)
        actions.status(f"Saved workspace {path}")
        actions.saved.emit(str(path))

    return actions.ws.worker.submit(
        f"Saving workspace {path.name}", lambda st: wf.save_workspace(path, data),
        on_done=done, on_failed=lambda m: actions.error("Cannot save the workspace", m),
        kind="workspace-save")


# ---- open ---------------------------------------------------------------------------------
def ask_open(actions: "WorkspaceActions") -> None:
    name, _ = QFileDialog.getOpenFileName(actions.window, "Open workspace",
                                          actions.window.settings.last_dir, WORKSPACE_FILTER)
    if name:
        open_workspace(actions, name)


def open_workspace(actions: "WorkspaceActions", path, recovered: bool = False) -> int:
    """Read and check a workspace on the worker, then ask/warn and apply it."""
    path = Path(path)
    return actions.ws.worker.submit(
        f"Opening workspace {path.name}", lambda st: wf.load_workspace(path),
        on_done=lambda loaded: _on_loaded(actions, loaded, recovered),
        on_failed=lambda m: actions.error("Cannot open the workspace", m), kind="workspace-open")


def _on_loaded(actions: "WorkspaceActions", loaded: wf.LoadedWorkspace, recovered: bool) -> None:
    ck = loaded.data.checkpoint
    if loaded.checkpoint_missing:
        answer = QMessageBox.question(
            actions.window, "Checkpoint not found",
            f"The workspace was made with the checkpoint\n{ck.path}\nwhich is not there any "
            "more (moved or deleted). Locate it?\n\nNo: open the sentences and results "
            "without a model.")
        if answer == QMessageBox.StandardButton.Yes:
            folder = QFileDialog.getExistingDirectory(actions.window,
                                                      "Locate the checkpoint folder",
                                                      str(Path(ck.path).parent))
            if folder:
                actions.ws.worker.submit(
                    "Checking the checkpoint", lambda st: wf.checkpoint_checksum(folder),
                    on_done=lambda s: _located(actions, loaded, folder, s, recovered),
                    on_failed=lambda m: actions.error("Cannot read it", m))
                return
        _apply(actions, loaded, None, recovered)
        return
    if loaded.checksum_mismatch and not _accept_mismatch(actions, ck.path):
        return
    _apply(actions, loaded, loaded.checkpoint_path, recovered)


def _located(actions: "WorkspaceActions", loaded, folder: str, checksum: str,
             recovered: bool) -> None:
    ck = loaded.data.checkpoint
    if ck.checksum and checksum != ck.checksum and not _accept_mismatch(actions, folder):
        return
    _apply(actions, loaded, folder, recovered)


def _accept_mismatch(actions: "WorkspaceActions", where: str) -> bool:
    answer = QMessageBox.warning(
        actions.window, "Different checkpoint",
        f"The checkpoint at\n{where}\nis not the one this workspace was saved with (its "
        "checksum differs). Vectors, similarities and probe results may not match the saved "
        "ones.\n\nOpen the workspace with it anyway?",
        QMessageBox.StandardButton.Open | QMessageBox.StandardButton.Cancel)
    return answer == QMessageBox.StandardButton.Open


def _apply(actions: "WorkspaceActions", loaded: wf.LoadedWorkspace, checkpoint: Optional[str],
           recovered: bool) -> None:
    data, ws = loaded.data, actions.ws
    actions.path = (Path(data.source) if data.source else None) if recovered else loaded.path
    actions.pending = data
    actions.saved_fp = "" if recovered else workspace_state.fingerprint(data)  # refined later
    spec = ws.model_spec
    same = (spec is not None and checkpoint is not None and ws.model_info is not None
            and Path(spec.path).resolve() == Path(checkpoint).resolve())
    if checkpoint is not None and not same:      # first: a model change clears the selection
        ck = data.checkpoint
        ws.load_model(ModelSpec(checkpoint, ck.device, ck.precision))
    actions.window.sentences.show_sentences(list(data.sentences))
    actions.opened.emit(str(loaded.path))
    try_finish_restore(actions)


def try_finish_restore(actions: "WorkspaceActions", force: bool = False) -> None:
    """Restore the pending workspace's views and selection once its model is loaded and its
    sentences are embedded (``force``: now, e.g. after the model failed to load)."""
    data, ws = actions.pending, actions.ws
    if data is None or ws.sentences != data.sentences:
        return
    ready = ws.all_embedded() if ws.embedder is not None else \
        all(t or not s.strip() for s, t in zip(ws.sentences, ws.tokens))
    if not force and (ws.is_loading() or not ready):
        return
    actions.pending = None
    workspace_state.restore(ws, actions.panels(), data)
    if actions.saved_fp:
        actions.saved_fp = workspace_state.fingerprint(actions.collect())
    actions.restored.emit()


# ---- quit -----------------------------------------------------------------------------------
def confirm_close(actions: "WorkspaceActions") -> bool:
    """Before quitting: offer to save work that would otherwise be lost. True to quit.

    Asks when a saved or opened workspace has changed since, or when probe results (minutes
    of work) were never saved. Unsaved sentences alone do not ask: the next session brings
    them back. Save writes at once, in this thread (a workspace file is small), so that
    nothing is left to a worker that is about to stop; if the save fails, the window stays.
    """
    if not actions.prompt_on_close:
        return True
    data = actions.collect()
    if workspace_state.fingerprint(data) == actions.saved_fp or not (actions.path
                                                                    or data.probe_runs):
        return True
    n = len(data.probe_runs)
    if actions.path:
        text = (f"The workspace {actions.path.name} has changed since it was saved or opened. "
                "Save the changes before quitting?")
    else:
        runs = "1 probe run that was" if n == 1 else f"{n} probe runs that were"
        text = f"This analysis holds {runs} never saved. Save a workspace before quitting?"
    buttons = (QMessageBox.StandardButton.Save | QMessageBox.StandardButton.Discard
               | QMessageBox.StandardButton.Cancel)
    answer = QMessageBox.question(actions.window, "Save changes?", text, buttons,
                                  QMessageBox.StandardButton.Save)
    if answer == QMessageBox.StandardButton.Discard:
        return True
    if answer != QMessageBox.StandardButton.Save:
        return False
    target = actions.path or ask_workspace_path(actions)
    if target is None:
        return False
    data.source = ""
    try:
        wf.save_workspace(target, data)
    except (ElmoError, OSError) as e:
        actions.error("Cannot save the workspace", str(e))
        return False
    actions.path, actions.saved_fp = target, workspace_state.fingerprint(data)
    actions.saved.emit(str(target))
    return True
