"""How faithful each drawn map is (issue 42): trustworthiness, continuity and the kNN kept of
every plot, measured on the worker after the plot's map is drawn
(:func:`elmo_engine.analysis.projection.map_faithfulness`), and the "Neighbourhood preserved"
colouring: each point coloured by the share of its k nearest neighbours (in the layer's
vectors) that stay among its k nearest on that plot's map.

:func:`kept_colours` is a function of values (no Qt); :class:`FaithfulnessJobs` submits the
measurements to the view's job group, one request kind per plot, so that a newer map of a plot
(UMAP after PCA) or a new run makes the older measurement stale.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

import numpy as np
from PySide6.QtCore import QObject, Signal

from elmo_engine.analysis.projection import Faithfulness, Projection, map_faithfulness
from elmo_explorer.state.worker import JobGroup, Lane
from elmo_explorer.views.projection.model import ProjectionModel

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


class FaithfulnessJobs(QObject):
    """Measures the faithfulness of each plot's map on the worker's long lane; the results go
    into ``model.faith`` (plot index → :class:`Faithfulness`, None: nothing to measure).

    Signals
    -------
    measured(k, faithfulness) : plot ``k``'s measure arrived (None: too few points)
    failed(k, message) : plot ``k``'s measurement failed
    """

    measured = Signal(int, object)
    failed = Signal(int, str)

    def __init__(self, jobs: JobGroup, model: ProjectionModel, parent=None):
        super().__init__(parent)
        self.jobs, self.model = jobs, model

    @staticmethod
    def kind(k: int) -> str:
        return f"faithfulness{k}"

    def stop(self) -> None:
        """Drop every measurement in flight and every result (a new run)."""
        for k in range(max(len(self.model.layers), len(self.model.faith)) + 1):
            self.jobs.invalidate(self.kind(k))
        self.model.faith = {}

    def cancel(self) -> List[int]:
        """Drop the measurements in flight (the results stay); the plots left unmeasured."""
        for k in range(len(self.model.layers) + 1):
            self.jobs.invalidate(self.kind(k))
        return [k for k in sorted(self.model.shown) if k not in self.model.faith]

    def measure(self, k: int, p: Projection, collapsed: bool = False) -> None:
        """Measure plot ``k``'s map ``p`` (a newer map of plot ``k`` makes it stale); a
        ``collapsed`` map (a note, not a map) has nothing to measure."""
        m = self.model
        m.faith.pop(k, None)
        acts, tokens, metric = m.acts, m.tokens, m.params.metric
        if collapsed or acts is None or tokens is None:
            self.jobs.invalidate(self.kind(k))
            m.faith[k] = None
            return

        def job(state):
            state.report(0, 1, f"faithfulness of the {p.layer.name} map")
            return map_faithfulness(acts, tokens, p, metric=metric, state=state)

        self.jobs.submit(f"Projection: faithfulness of {p.layer.name}", job, lane=Lane.LONG,
                         kind=self.kind(k), on_done=lambda f: self._done(k, p, f),
                         on_failed=lambda message: self._failed(k, p, message))

    def _done(self, k: int, p: Projection, f: Optional[Faithfulness]) -> None:
        if self.model.shown.get(k) is not p:              # the plot shows another map now
            return
        self.model.faith[k] = f
        self.measured.emit(k, f)

    def _failed(self, k: int, p: Projection, message: str) -> None:
        if self.model.shown.get(k) is p:
            self.model.faith[k] = None
            self.failed.emit(k, message)

    def pending(self) -> bool:
        """Whether a measurement is queued or running."""
        return any(self.jobs.is_running(self.kind(k)) for k in self.model.shown)

    def missing(self) -> List[int]:
        """The plots drawn whose map has no measure and none in flight."""
        return [k for k in sorted(self.model.shown) if k not in self.model.faith
                and not self.jobs.is_running(self.kind(k))]
