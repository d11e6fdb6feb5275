"""Analysis panels. Each view lives in ``app/panels/<view>.py`` as ``<View>Panel(QWidget)``.

A panel takes ``(workspace, parent=None)`` and provides the
:class:`~elmo_explorer.panels.protocol.AnalysisPanel` protocol (title, ``ready``, exports,
view state, probe runs, report parts). The main window shows them as tabs, in :data:`VIEWS`
order.
"""
from __future__ import annotations

import importlib
import logging
from typing import List, Tuple

log = logging.getLogger(__name__)

#: the analysis views shown as tabs, in order
VIEWS = ("contexts", "projection", "probes", "layers")


def panel_class_name(view: str) -> str:
    """``"contexts"`` → ``"ContextsPanel"``."""
    return view.capitalize() + "Panel"


def load_panel_classes(views=None) -> Tuple[List[Tuple[str, type]], List[str]]:
    """Import the panel classes that exist (of ``views``, default :data:`VIEWS`).

    Returns ``([(view, class), …], [problem, …])``: a view whose module is not there yet, or that
    fails to import, is skipped and its problem is logged and returned.
    """
    found: List[Tuple[str, type]] = []
    problems: List[str] = []
    for view in (VIEWS if views is None else views):
        module_name = f"elmo_explorer.panels.{view}"
        try:
            module = importlib.import_module(module_name)
            found.append((view, getattr(module, panel_class_name(view))))
        except ModuleNotFoundError as e:
            if e.name != module_name:
                log.exception("the %s view cannot be imported", view)
                problems.append(f"the {view} view cannot be imported: {e}")
            else:
                log.info("the %s view is not installed (%s missing)", view, module_name)
                problems.append(f"the {view} view is not installed")
        except Exception as e:  # a broken view must not keep the app from starting
            log.exception("the %s view cannot be imported", view)
            problems.append(f"the {view} view cannot be imported: {type(e).__name__}: {e}")
    return found, problems
