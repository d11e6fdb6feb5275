"""How faithful each drawn map is (issue 42): trustworthiness, continuity and the kNN kept of
every plot, measured on the worker after the plot's map is drawn
(:func:`elmo_engine.analysis.projection.map_faithfulness`), and the "Neighbourhood preserved"
colouring: each point coloured by the share of its k nearest neighbours (in the layer's
vectors) that stay among its k nearest on that plot's map.

:func:`kept_colours` is a function of values (no Qt); :class:`MapFaithfulness` submits the
measurements to the view's job group, one request kind per plot, so that a newer map of a plot
(UMAP after PCA) or a new run makes the older measurement stale, and draws what comes back.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional, Tuple

import numpy as np
from PySide6.QtCore import QObject, Signal

from elmo_engine.analysis.projection import Faithfulness, Projection, map_faithfulness
from elmo_explorer.state.worker import JobGroup, Lane
from elmo_explorer.views.projection.model import ProjectionModel

if TYPE_CHECKING:
    from elmo_explorer.views.projection.view import ProjectionView

#: the colouring's key among the colour-by choices
KEPT = "kept"
#: the share of neighbours kept, in bins: (upper bound, name, colour), torn (red) to kept (blue)
KEPT_BINS = ((0.2, "0–20 %", "#b2182b"), (0.4, "20–40 %", "#ef8a62"),
             (0.6, "40–60 %", "#d8b365"), (0.8, "60–80 %", "#67a9cf"),
             (1.0, "80–100 %", "#2166ac"))
#: the points outside the measured sample (or of a map not measured yet)
NOT_MEASURED = ("not measured", "#c8c8c8")


def kept_colours(f: Optional[Faithfulness], n: int, name: str = ""
                 ) -> Tuple[List[str], List[Tuple[str, str, int]]]:
    """Per point of a map its bin's colour, and the legend ``[(name, colour, count)]``
    (``name``: the plot, said in the first row); all grey when ``f`` is None (not measured)."""
    if f is None or len(f.per_point) != n:
        return [NOT_MEASURED[1]] * n, [(NOT_MEASURED[0], NOT_MEASURED[1], n)]
    share = np.asarray(f.per_point, np.float64)                         # (n,) NaN: not measured
    measured = np.isfinite(share)
    code = np.full(n, len(KEPT_BINS), np.int64)
    code[measured] = np.searchsorted([b[0] for b in KEPT_BINS[:-1]], share[measured],
                                     side="left")
    palette = [b[2] for b in KEPT_BINS] + [NOT_MEASURED[1]]
    counts = np.bincount(code, minlength=len(palette))
    legend = [(f"{label} of k={f.k} kept", colour, int(counts[i]))
              for i, (_, label, colour) in enumerate(KEPT_BINS)]
    if counts[-1]:
        legend.append((NOT_MEASURED[0], NOT_MEASURED[1], int(counts[-1])))
    if name:
        legend[0] = (f"{name}: {legend[0][0]}", legend[0][1], legend[0][2])
    return [palette[c] for c in code.tolist()], legend


class MapFaithfulness(QObject):
    """The faithfulness part of the Projection view: measures each drawn map on the worker's
    long lane (results in ``model.faith``: plot index → :class:`Faithfulness`, None: nothing to
    measure), writes each plot's caption line and, coloured by :data:`KEPT`, each plot's point
    colours and the legend. The panel tells it what happened (:meth:`drawn`,
    :meth:`run_started`, :meth:`run_finished`, :meth:`cancel`, :meth:`stop`) and waits for
    ``settled`` before it calls itself ready.

    Signals
    -------
    settled() : a measurement ended and none is queued or running
    """

    settled = Signal()

    def __init__(self, jobs: JobGroup, model: ProjectionModel, view: "ProjectionView",
                 parent=None):
        super().__init__(parent)
        self.jobs, self.model, self.view = jobs, model, view
        #: the run's PCA maps are replaced by UMAP soon: they are not measured
        self.umap_follows = False

    @staticmethod
    def kind(k: int) -> str:
        return f"faithfulness{k}"

    def _invalidate(self) -> None:
        for k in range(max(len(self.model.layers), len(self.model.faith)) + 1):
            self.jobs.invalidate(self.kind(k))

    # ---- what the panel tells it ----------------------------------------------------------
    def run_started(self, umap_follows: bool) -> None:
        """A new run's PCA is about to be drawn: drop every measure (in flight or done)."""
        self._invalidate()
        self.model.faith = {}
        self.umap_follows = umap_follows

    def stop(self) -> None:
        """The plots were cleared: drop every measure."""
        self.run_started(False)

    def run_finished(self) -> None:
        """The run ended: measure the maps still unmeasured (a PCA kept where UMAP failed)."""
        self.umap_follows = False
        for k in sorted(self.model.shown):
            if k not in self.model.faith and not self.jobs.is_running(self.kind(k)):
                self.measure(k)

    def cancel(self) -> None:
        """Drop the measurements in flight (the results stay); their captions are cleared."""
        self._invalidate()
        self.umap_follows = False
        for k in sorted(self.model.shown):
            if k not in self.model.faith:
                self.view.set_caption(k, "")

    def drawn(self, k: int, p: Projection, collapsed: bool) -> None:
        """Plot ``k`` now shows ``p`` (``collapsed``: a note, not a map): measure it, unless
        UMAP replaces this PCA map in a moment."""
        self.model.faith.pop(k, None)
        if collapsed or p.method == "umap" or not self.umap_follows:
            self.measure(k, collapsed)
        else:
            self.view.set_caption(k, "")
        if self.active():
            self.colour(k)

    # ---- measuring ------------------------------------------------------------------------
    def measure(self, k: int, collapsed: bool = False) -> None:
        """Measure plot ``k``'s map (a newer map of plot ``k`` makes it stale); a ``collapsed``
        map has nothing to measure."""
        m = self.model
        p = m.shown[k]
        m.faith.pop(k, None)
        acts, tokens, metric = m.acts, m.tokens, m.params.metric
        if collapsed or acts is None or tokens is None:
            self.jobs.invalidate(self.kind(k))
            m.faith[k] = None
            self.view.set_caption(k, "")
            return
        self.view.set_caption(k, "measuring how faithful the map is…")

        def job(state):
            state.report(0, 1, f"faithfulness of the {p.layer.name} map")
            return map_faithfulness(acts, tokens, p, metric=metric, state=state)

        self.jobs.submit(f"Projection: faithfulness of {p.layer.name}", job, lane=Lane.LONG,
                         kind=self.kind(k), on_done=lambda f: self._end(k, p, f),
                         on_failed=lambda message: self._end(k, p, None, message))

    def _end(self, k: int, p: Projection, f: Optional[Faithfulness], error: str = "") -> None:
        if self.model.shown.get(k) is not p:              # the plot shows another map now
            return
        self.model.faith[k] = f
        self.view.set_caption(k, f"not measured: {error}" if error else
                              f.caption() if f is not None else "too few points to measure")
        if self.active():
            self.colour(k)
        if not self.pending():
            self.settled.emit()

    def pending(self) -> bool:
        """Whether a measurement is queued or running."""
        return any(self.jobs.is_running(self.kind(k)) for k in self.model.shown)

    # ---- the "Neighbourhood preserved" colouring -------------------------------------------
    def active(self) -> bool:
        return self.view.controls.colour_by() == KEPT

    def colour(self, k: int) -> None:
        """Plot ``k``'s points by the share of their neighbours its map keeps; the legend counts
        the plot under the mouse (or, when that one has no measure, the first that has)."""
        m = self.model
        if m.tokens is None or k not in m.shown:
            return
        colours, legend = kept_colours(m.faith.get(k), len(m.tokens), m.layers[k].name)
        self.view.plots.set_plot_colours(k, colours)
        shown = min(m.current_plot, len(m.layers) - 1)
        if m.faith.get(shown) is None:
            shown = next((j for j in sorted(m.faith) if m.faith[j] is not None), shown)
        if k == shown:
            self.view.legend.set_entries(legend)

    def colour_all(self) -> None:
        for k in sorted(self.model.shown):
            self.colour(k)
