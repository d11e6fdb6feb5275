"""The contexts view's figure, as a function of values, for File → Export: the heatmaps of one
view or of every view side by side, ordered by group (:mod:`elmo_engine.io.figures.contexts`,
the one figure path; nothing here paints widgets or touches torch). The report's contexts part
is computed by :mod:`elmo_engine.analysis.contexts.report` from the workspace.
"""
from __future__ import annotations

from typing import Optional

from elmo_engine.analysis.contexts import compare as cmp


def heatmap_figure(comp: Optional[cmp.Comparison], view: Optional[int] = None):
    """The matplotlib figure of one view (0 … L, L+1 = mix) of the current comparison, or
    of all views side by side (None), drawn by the engine's one figure path."""
    from elmo_engine.io.figures.contexts import contexts_heatmaps

    if comp is None:
        raise LookupError("nothing to draw yet: pick a word that occurs in the sentences")
    return contexts_heatmaps(comp, None if view is None else [view])


