"""What the main window asks of an analysis view: the :class:`AnalysisPanel` protocol.

Each view is a package ``app/elmo_explorer/views/<view>/`` whose ``controller.py`` holds
``<View>Panel``, a ``QWidget`` built as
``<View>Panel(workspace, parent)`` and split into a model (its state, plain Python), a view (its
widgets) and the panel itself, the controller that wires them to the workspace and the worker.
The window (tabs, File → Export, the screenshot tool) and the workspace actions (save/open,
autosave, Export report…) talk to a panel only through the members below; every panel has
all of them (a member a view does not need answers "nothing": ``{}``, ``[]``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Protocol, runtime_checkable

if TYPE_CHECKING:                       # typing only: importing them needs Qt and the engine
    from PySide6.QtCore import SignalInstance
    from PySide6.QtGui import QAction

    from elmo_explorer.state.job_group import JobGroup



@runtime_checkable
class AnalysisPanel(Protocol):
    """The members an analysis view (a tab of the main window) provides.

    Attributes
    ----------
    title : the tab's title
    jobs : the view's :class:`~elmo_explorer.state.job_group.JobGroup` (the window puts the
        groups of the views not shown backstage)
    ready : emitted once the view has drawn what its current data asks for (the screenshot
        tool and the tests wait on it)
    """

    title: str
    ready: "SignalInstance"
    jobs: "JobGroup"

    def is_ready(self) -> bool:
        """Whether the view has finished the jobs its current data asked for."""
        ...

    def export_actions(self) -> List["QAction"]:
        """The view's entries of File → Export."""
        ...

    def view_state(self) -> Dict[str, Any]:
        """The view's parameters as JSON values, saved with a workspace (``{}``: none)."""
        ...

    def restore_view_state(self, state: Dict[str, Any]) -> None:
        """Apply a saved ``view_state()``; missing, unknown or invalid keys are ignored."""
        ...

    def probe_runs(self) -> List[dict]:
        """Probe results to save with a workspace, as ``results.json`` objects (``[]``: none)."""
        ...

    def restore_probe_runs(self, runs: List[dict]) -> None:
        """Show probe results saved with a workspace."""
        ...


class PanelDefaults:
    """The protocol's "nothing" answers, for a view without such a part: no saved parameters,
    no probe runs.
    A panel lists it before ``QWidget`` among its bases and overrides what it has."""

    def view_state(self) -> Dict[str, Any]:
        return {}

    def restore_view_state(self, state: Dict[str, Any]) -> None:
        """Nothing to restore."""

    def probe_runs(self) -> List[dict]:
        return []

    def restore_probe_runs(self, runs: List[dict]) -> None:
        """This view shows no probe runs."""

    def main_button(self):
        """The button of the view's main action where it stands now (View ▸ Run, Ctrl+R,
        clicks it when it is enabled): the view's own ``main_button()`` (a view with tabs
        answers for the tab shown), None for a view that runs by itself."""
        view = getattr(self, "view", None)
        find = getattr(view, "main_button", None)
        return find() if callable(find) else None


class SettlesWithJobs:
    """``is_ready`` for a view that settles once (it calls :meth:`_set_ready` when what it
    shows is final, and clears ``_ready`` when a request starts) and is busy while its job
    group (``self.jobs``) is not idle: ready is both. A panel lists it before ``QWidget``."""

    _ready = False

    def is_ready(self) -> bool:
        return self._ready and self.jobs.is_idle()  # type: ignore[attr-defined]

    def _set_ready(self) -> None:
        self._ready = True
        if self.jobs.is_idle():                     # type: ignore[attr-defined]
            self.ready.emit()                       # type: ignore[attr-defined]
