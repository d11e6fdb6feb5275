"""Autosave and crash recovery of the analysis (:mod:`elmo_engine.io.recovery` on disk).

Every minute, while anything changed since the last save or autosave, the analysis is written
to the autosave file on the worker; a clean exit removes it, and the next start offers to
recover one that a crashed session left. Used by
:class:`elmo_explorer.persistence.workspace_actions.WorkspaceActions`.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Optional

from PySide6.QtWidgets import QMessageBox

from elmo_engine.io import recovery
from elmo_engine.io import workspace_file as wf
from elmo_explorer.persistence import workspace_files
from elmo_explorer.persistence import workspace_state

if TYPE_CHECKING:
    from elmo_explorer.persistence.workspace_actions import WorkspaceActions

log = logging.getLogger(__name__)

AUTOSAVE_MS = 60_000


def autosave(actions: "WorkspaceActions") -> Optional[int]:
    """Write the autosave if anything changed since the last save or autosave."""
    data = actions.collect()
    fp = workspace_state.fingerprint(data)
    if not data.sentences or fp in (actions.saved_fp, actions.autosaved_fp) \
            or actions.ws.worker.is_stopped():
        return None
    target = recovery.autosave_path(actions.autosave_dir)

    def done(_r) -> None:
        actions.autosaved_fp = fp
        actions.autosaved.emit(str(target))

    return actions.ws.worker.submit("Autosaving", lambda st: wf.save_workspace(target, data),
                                    on_done=done, on_failed=lambda m: log.warning(
                                        "autosave failed: %s", m), kind="autosave")


def check_recovery(actions: "WorkspaceActions") -> int:
    """Offer to recover an autosave left by a session that did not end cleanly."""
    return actions.ws.worker.submit("Looking for unsaved work",
                                    lambda st: recovery.find_recovery(actions.autosave_dir),
                                    on_done=lambda rec: _offer(actions, rec), kind="recovery")


def _offer(actions: "WorkspaceActions", rec: Optional[recovery.Recovery]) -> None:
    if rec is None:
        return
    answer = QMessageBox.question(
        actions.window, "Recover unsaved work?",
        f"ELMo Explorer did not close properly last time. An autosaved workspace from "
        f"{rec.saved_at or 'the last session'} ({rec.n_sentences} sentences) can be restored."
        "\n\nRecover it?")
    if answer == QMessageBox.StandardButton.Yes:
        workspace_files.open_workspace(actions, rec.path, recovered=True)
    else:
        recovery.discard_autosave(actions.autosave_dir)


def discard_on_exit(actions: "WorkspaceActions") -> None:
    """A clean exit stops the autosave and leaves no autosave file."""
    actions.timer.stop()
    try:
        recovery.discard_autosave(actions.autosave_dir)
    except OSError as e:
        log.warning("cannot remove the autosave: %s", e)
