"""The probes view's state, in plain Python: its tasks, its runs and the live training curves.

No Qt here: :class:`ProbesModel` is what :class:`~elmo_explorer.panels.probes.ProbesPanel`
(the controller) keeps and :class:`~elmo_explorer.panels.probes_view.ProbesView` draws.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

from elmo_engine.analysis.probes.experiment import ProbeConfig, ProbeResult
from elmo_engine.analysis.probes.tables import results_rows
from elmo_engine.analysis.probes.tasks import ProbeTask, demo_task

SEMANTIC_COLOURS = ["#c0392b", "#e67e22", "#8e44ad", "#d35400"]
SYNTAX_COLOURS = ["#2471a3", "#17a589", "#2e4053", "#5dade2"]
QUICK_SENTENCES = 600            # training sentences of the automatic first-show preview


def _semantic(run: ProbeResult) -> bool:
    return run.is_wsd or "sense" in run.task


@dataclass
class ProbesModel:
    """Tasks on offer, finished runs, and the curves of the run in progress.

    Attributes
    ----------
    tasks : the chooser's tasks (the demo tasks first)
    runs : finished runs of this session, in order
    config : the settings of a run started from the Train button
    curves : phase → one row per epoch (losses, then dev accuracies) of the current run
    token : the current run's number; events of older runs are stale
    job : the worker job training now, or None
    auto_done : the automatic first-show preview has been started
    """

    tasks: List[ProbeTask] = field(
        default_factory=lambda: [demo_task("pos"), demo_task("wsd"), demo_task("supersense")])
    runs: List[ProbeResult] = field(default_factory=list)
    config: ProbeConfig = field(default_factory=ProbeConfig)
    curves: Dict[str, List[List[float]]] = field(default_factory=dict)
    token: int = 0
    job: Optional[int] = None
    auto_done: bool = False

    # ---- runs -------------------------------------------------------------------------------
    def demo_tasks(self, quick: bool) -> List[ProbeTask]:
        """The demo POS and word-sense tasks; ``quick``: a preview on a seeded subset of
        :data:`QUICK_SENTENCES` training sentences."""
        tasks = [self.tasks[0], self.tasks[1]]
        if quick:
            tasks = [ProbeTask(f"{t.name} (preview, {QUICK_SENTENCES} sentences)", t.task, t.load,
                               t.semantic, {"max_train_sentences": QUICK_SENTENCES})
                     for t in tasks]
        return tasks

    def new_run(self) -> int:
        """Start a run: its token (events carry it)."""
        self.token += 1
        return self.token

    def on_event(self, token: int, event: dict) -> bool:
        """Take a training event of run ``token``; False when it is from a superseded run."""
        if token != self.token:
            return False
        if event["phase"] == "start":
            self.curves = {}
        else:
            self.curves.setdefault(event["phase"], []).append(event["loss"] + event["dev"])
        return True

    def add_results(self, results: List[ProbeResult]) -> None:
        self.runs.extend(results)

    def restore(self, runs: List[dict]) -> None:
        """Runs saved with a workspace, replacing the current ones."""
        self.runs = [ProbeResult.from_dict(d) for d in runs]

    def clear(self) -> None:
        self.runs.clear()
        self.curves = {}

    def to_dicts(self) -> List[dict]:
        """The runs as ``results.json`` objects (saved with a workspace)."""
        return [r.to_dict() for r in self.runs]

    # ---- what the view draws ------------------------------------------------------------------
    def colour(self, i: int) -> str:
        """Run ``i``'s colour: reds for semantic tasks, blues for syntactic ones, in turn."""
        run = self.runs[i]
        pal = SEMANTIC_COLOURS if _semantic(run) else SYNTAX_COLOURS
        same = [j for j in range(i) if _semantic(self.runs[j]) == _semantic(run)]
        return pal[len(same) % len(pal)]

    def table_rows(self) -> List[List[str]]:
        """Every number of every run, one row per layer (and the mix); also the CSV export."""
        return results_rows(self.runs)
