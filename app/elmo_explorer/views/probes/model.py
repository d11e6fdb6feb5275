"""The probes view's state, in plain Python: its tasks, its runs and the live training curves.

No Qt here: :class:`ProbesModel` is what :class:`~elmo_explorer.views.probes.controller.ProbesPanel`
(the controller) keeps and :class:`~elmo_explorer.views.probes.view.ProbesView` draws.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

import html

from elmo_engine.analysis.probes.results import ProbeResult
from elmo_engine.analysis.probes.settings import ProbeConfig
from elmo_engine.io.figures.probes import run_colors
from elmo_engine.analysis.probes.tables import results_rows
from elmo_engine.analysis.probes.tasks import ProbeTask, demo_task
from elmo_engine.analysis.probes.usefulness import Usefulness, table_rows


#: a control-task score within this much of the task's (selectivity below it) is flagged:
#: the probe, not the representation, may be doing the work (Hewitt & Liang 2019)
SELECTIVITY_FLAG = 0.05
CONTROL_EXPLANATION = ("a probe that can memorise the word types scores high on a control task, "
                       "so low selectivity means the probe, not the representation, does the "
                       "work (Hewitt & Liang 2019)")


def low_selectivity(run: ProbeResult):
    """The run's entries (layers, then the mix) whose control task scores within
    :data:`SELECTIVITY_FLAG` of the task, as ``(where, test, control, selectivity)``."""
    entries = [(f"layer {h}", e) for h, e in enumerate(run.layers)] + [("mix", run.mix)]
    return [(where, e.test, e.control_test, e.selectivity) for where, e in entries
            if e.control_test is not None and e.selectivity is not None
            and e.selectivity < SELECTIVITY_FLAG]


def control_warning(runs: List[ProbeResult]) -> str:
    """One line per run whose control task scores near the task, naming the worst entry and
    saying why it matters in one sentence; ``""`` when no run has one."""
    lines = []
    for run in runs:
        flagged = low_selectivity(run)
        if not flagged:
            continue
        where, test, control, sel = min(flagged, key=lambda f: f[3])
        more = f" (and {len(flagged) - 1} more)" if len(flagged) > 1 else ""
        lines.append(f"⚠ {run.name}, {where}{more}: control task {control:.2f} vs task "
                     f"{test:.2f}, selectivity {sel:+.2f} — {CONTROL_EXPLANATION}.")
    return "\n".join(lines)


@dataclass
class ProbesModel:
    """Tasks on offer, finished runs, and the curves of the run in progress.

    Attributes
    ----------
    tasks : the chooser's tasks (the demo tasks first)
    runs : finished runs of this session, in order
    config : the settings of a run started from the Train button
    curves : phase → one row per epoch (losses, then dev accuracies) of the current run
    recorded : the runs on show are the bundled model's recorded reference results (replaced
        by the first run the user trains)
    """

    tasks: List[ProbeTask] = field(
        default_factory=lambda: [demo_task("pos"), demo_task("wsd"), demo_task("supersense")])
    runs: List[ProbeResult] = field(default_factory=list)
    config: ProbeConfig = field(default_factory=ProbeConfig)
    curves: Dict[str, List[List[float]]] = field(default_factory=dict)
    recorded: bool = False
    seed: Optional[int] = None

    # ---- runs -------------------------------------------------------------------------------
    def demo_tasks(self) -> List[ProbeTask]:
        """The demo POS and word-sense tasks."""
        return [self.tasks[0], self.tasks[1]]

    def show_recorded(self, runs: List[ProbeResult]) -> None:
        """Show the recorded reference runs (only while nothing else is on show)."""
        if not self.runs and runs:
            self.runs = list(runs)
            self.recorded = True

    def recorded_text(self) -> str:
        """What the view says above recorded runs: that they are recorded, and the commands."""
        if not self.recorded:
            return ""
        cmds = "".join(f"<br><code>{html.escape(r.command or '(no command recorded)')}</code>"
                       for r in self.runs)
        return ("<b>Recorded results of the bundled model</b> (nothing has trained in this "
                "session; press <b>Train</b> or <b>Run demo</b> to train). Made with:" + cmds)

    def new_run(self) -> None:
        """Start a run: no curves yet."""
        self.curves = {}
        self.seed = None

    def on_event(self, event: dict) -> None:
        """Take a training event of the current run (start, or one epoch of a phase)."""
        if event["phase"] == "start" or event.get("seed", self.seed) != self.seed:
            self.curves = {}                     # a new task or seed: its own curves
            self.seed = event.get("seed")
        if event["phase"] != "start":
            self.curves.setdefault(event["phase"], []).append(event["loss"] + event["dev"])

    def add_results(self, results: List[ProbeResult]) -> None:
        if self.recorded:                        # the user's own runs replace the recorded ones
            self.runs, self.recorded = [], False
        self.runs.extend(results)

    def restore(self, runs: List[dict]) -> None:
        """Runs saved with a workspace, replacing the current ones."""
        self.runs = [ProbeResult.from_dict(d) for d in runs]
        self.recorded = False

    def clear(self) -> None:
        self.runs.clear()
        self.curves = {}
        self.recorded = False

    def to_dicts(self) -> List[dict]:
        """The runs as ``results.json`` objects (saved with a workspace; not the recorded
        reference runs, which ship with the app)."""
        return [] if self.recorded else [r.to_dict() for r in self.runs]

    # ---- what the view draws ------------------------------------------------------------------
    def colours(self) -> List[str]:
        """The runs' colours by task kind (syntax blue, semantics red, others a fixed palette),
        as in exported figures and reports."""
        return run_colors(self.runs)

    def colour(self, i: int) -> str:
        return self.colours()[i]

    def control_warning(self) -> str:
        """The runs' low-selectivity flags (:func:`control_warning`)."""
        return control_warning(self.runs)

    def table_rows(self) -> List[List[str]]:
        """Every number of every run, one row per layer (and the mix); also the CSV export."""
        return results_rows(self.runs)

    # ---- usefulness beside identity (issue 42) ------------------------------------------------
    def usefulness_runs(self) -> List[ProbeResult]:
        """The runs that carry a usefulness table (computed with the cumulative probes)."""
        return [r for r in self.runs if r.usefulness is not None]

    def usefulness_tables(self) -> List[Usefulness]:
        return [r.usefulness for r in self.usefulness_runs() if r.usefulness is not None]

    def usefulness_colours(self) -> List[str]:
        """The tables' colours by task kind, as in the figure."""
        return run_colors(self.usefulness_runs())

    def usefulness_rows(self) -> List[List[str]]:
        """One row per layer of every table; also the TSV export."""
        return table_rows(self.usefulness_tables())

    def usefulness_flags(self) -> str:
        """One sentence per task whose two expected layers disagree (Tenney et al. 2019)."""
        return "\n".join(t.flag for t in self.usefulness_tables() if t.flag)
