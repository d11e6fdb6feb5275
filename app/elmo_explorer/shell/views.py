"""The analysis views the main window shows as tabs, imported by name (no loading by string).

Each view is a package ``elmo_explorer.views.<name>`` whose ``controller`` module holds the panel,
``<Name>Panel(QWidget)``: it takes ``(workspace, parent=None)`` and provides the
:class:`~elmo_explorer.views.protocol.AnalysisPanel` protocol (title, ``ready``, exports, view
state, probe runs, report parts). A new view: write its package, import its panel here and add it
to :data:`PANELS` and its name to :data:`.view_names.VIEWS`; the tabs follow that order.
"""
from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Tuple

from elmo_explorer.shell import view_names
from elmo_explorer.views.characters.controller import CharactersPanel    # issue 41
from elmo_explorer.views.contexts.controller import ContextsPanel
from elmo_explorer.views.corpus.controller import CorpusPanel          # issue 28: the Corpus view
from elmo_explorer.views.layers.controller import LayersPanel
from elmo_explorer.views.probes.controller import ProbesPanel
from elmo_explorer.views.projection.controller import ProjectionPanel
# language model view (issue 27)
from elmo_explorer.views.language_model.controller import LanguageModelPanel
from elmo_explorer.views.units.controller import UnitsPanel                # issue 40

#: every analysis view by name
PANELS: Dict[str, type] = {
    "contexts": ContextsPanel,
    "projection": ProjectionPanel,
    "probes": ProbesPanel,
    "layers": LayersPanel,
    "language-model": LanguageModelPanel,          # issue 27
    "corpus": CorpusPanel,                          # issue 28
    "characters": CharactersPanel,                  # issue 41
    "units": UnitsPanel,                            # issue 40
}

#: the analysis views shown as tabs, in order (named in :mod:`.view_names`, which has no Qt)
VIEWS: Tuple[str, ...] = view_names.VIEWS


def panel_classes(views: Optional[Iterable[str]] = None) -> List[Tuple[str, type]]:
    """``[(view, panel class), …]`` for ``views`` (default :data:`VIEWS`), in that order.

    Raises ``KeyError`` naming a view that does not exist (a programming error, not a user's).
    """
    names = VIEWS if views is None else tuple(views)
    unknown = [v for v in names if v not in PANELS]
    if unknown:
        raise KeyError(f"no such view: {', '.join(unknown)} (known: {', '.join(PANELS)})")
    return [(v, PANELS[v]) for v in names]
