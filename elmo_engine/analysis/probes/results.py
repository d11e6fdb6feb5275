"""What one probe run found: :class:`ProbeResult` with a :class:`LayerResult` per biLM layer and
the scalar mix's :class:`MixResult`, and the documented JSON they write and read. Plain
dataclasses, no torch: the Probes view, ``report`` and the recorded reference runs read results
without training anything (:mod:`.experiment` trains them).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional

from elmo_engine.atomic import atomic_write_text
from elmo_engine.analysis.probes.kinds import TaskKind
from elmo_engine.analysis.probes.usefulness import Usefulness

DESCRIPTION = (
    "ELMo layer probe results, every configuration trained over the seeds in 'seeds'. A score "
    "field holds the mean over seeds; '<name>_sd' is its sample standard deviation and "
    "'<name>_per_seed' the values per seed. 'layers': one entry per biLM layer (0 = context-free "
    "token layer) with the dev score (dev is used for early stopping) and the test score ('test'; "
    "accuracy for tagging, Raganato et al.'s F1 for WSD with WordNet's first sense for lemmas "
    "unseen in training, the mean of the per-lemma accuracies for the demo word-sense task, whose "
    "'per_lemma' lists them); 'centroid_test' (WSD) is the nearest-sense-centroid score of Peters "
    "et al. (2018); with a control task, 'control_test' is the same probe's score on word types "
    "mapped to random labels (Hewitt & Liang 2019) and 'selectivity' = test - control_test. "
    "'below_baseline' is true when a test score is under baselines[reference_baseline]. 'mix': the "
    "scalar-mix probe, gamma * sum_k softmax(s)_k h_k feeding one linear classifier, trained "
    "together (at least config.mix_min_epochs epochs, then early stopping on dev loss); 'weights' "
    "are the softmax-normalised s_k (they sum to 1) and measure how useful each layer was to this "
    "probe, not what a layer 'is'; 'near_uniform' is true when max_k |w_k - 1/K| < 0.05. "
    "'notes' says in words what is flagged. 'timings' splits 'wall_time_s' (reading, embedding, "
    "training, scoring). All scores are fractions in [0, 1].")



@dataclass
class LayerResult:
    layer: int
    dev: float
    test: float
    macro_f1: float
    per_label: Dict[str, dict] = field(default_factory=dict)
    centroid_test: Optional[float] = None
    control_test: Optional[float] = None
    selectivity: Optional[float] = None
    dev_sd: float = 0.0
    test_sd: float = 0.0
    test_per_seed: List[float] = field(default_factory=list)
    control_test_sd: Optional[float] = None
    selectivity_sd: Optional[float] = None
    below_baseline: bool = False
    per_lemma: Optional[Dict[str, dict]] = None


@dataclass
class MixResult:
    weights: List[float]
    gamma: float
    dev: float
    test: float
    macro_f1: float
    centroid_test: Optional[float] = None
    control_weights: Optional[List[float]] = None
    control_test: Optional[float] = None
    selectivity: Optional[float] = None
    weights_sd: List[float] = field(default_factory=list)
    weights_per_seed: List[List[float]] = field(default_factory=list)
    gamma_sd: float = 0.0
    dev_sd: float = 0.0
    test_sd: float = 0.0
    test_per_seed: List[float] = field(default_factory=list)
    centroid_test_sd: Optional[float] = None
    control_test_sd: Optional[float] = None
    selectivity_sd: Optional[float] = None
    epochs_per_seed: List[int] = field(default_factory=list)
    near_uniform: bool = False
    below_baseline: bool = False


_OPTIONAL = ("centroid_test", "control_test", "selectivity", "control_test_sd", "selectivity_sd",
             "centroid_test_sd", "control_weights", "per_lemma")


def model_label(embedder) -> str:
    """The ``model`` a probe run records: the checkpoint's name, else the start of its
    checksum (the Layers view pairs its MDL rows with the runs of the loaded model by it)."""
    info = getattr(getattr(embedder, "model", None), "info", None)
    return str(getattr(info, "name", "") or getattr(embedder, "checksum", "")[:16])


@dataclass
class ProbeResult:
    """Everything one probe run found; ``to_dict`` / ``write_json`` give the documented JSON.
    ``command``: the command line that made it (recorded reference results carry one)."""

    task: str
    name: str
    label: str
    model: str
    layers: List[LayerResult]
    mix: MixResult
    baselines: Dict[str, float]
    counts: Dict[str, int]
    config: Dict[str, object]
    history: Dict[str, object]
    wall_time_s: float = 0.0
    timings: Dict[str, float] = field(default_factory=dict)
    description: str = DESCRIPTION
    seeds: List[int] = field(default_factory=list)
    reference_baseline: str = ""
    notes: List[str] = field(default_factory=list)
    command: Optional[str] = None
    usefulness: Optional[Usefulness] = None      # probe --cumulative (usefulness.py)

    @property
    def kind(self) -> Optional[TaskKind]:
        """The task's kind (None for a task name this version does not know)."""
        try:
            return TaskKind(self.task)
        except ValueError:
            return None

    @property
    def is_wsd(self) -> bool:
        return self.kind is not None and self.kind.is_wsd

    @property
    def semantic(self) -> bool:
        return self.is_wsd or "sense" in self.task

    def to_dict(self) -> dict:
        d = asdict(self)
        d = {"description": d.pop("description"), **d}
        for entry in d["layers"] + [d["mix"]]:
            for key in _OPTIONAL:
                if key in entry and entry[key] is None:
                    del entry[key]
        if d["command"] is None:
            del d["command"]
        if d["usefulness"] is None:
            del d["usefulness"]
        return d

    def write_json(self, path) -> None:
        """Write the results atomically as indented UTF-8 JSON."""
        atomic_write_text(path, json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n")

    @classmethod
    def from_dict(cls, d: dict) -> "ProbeResult":
        """A result from its JSON, checked field by field first (a ``ValueError`` naming the key:
        :mod:`elmo_engine.io.probe_result_check`); older files without the seed fields load too."""
        from elmo_engine.io.probe_result_check import check_result_dict

        check_result_dict(d)
        fields_ = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        fields_["layers"] = [LayerResult(**{k: v for k, v in e.items()
                                            if k in LayerResult.__dataclass_fields__})
                             for e in d["layers"]]
        fields_["mix"] = MixResult(**{k: v for k, v in d["mix"].items()
                                      if k in MixResult.__dataclass_fields__})
        if d.get("usefulness") is not None:
            fields_["usefulness"] = Usefulness.from_dict(d["usefulness"])
            if len(fields_["usefulness"].rows) != len(fields_["layers"]):
                raise ValueError("key 'usefulness.rows' must hold one row per layer")
        return cls(**fields_)


__all__ = ["DESCRIPTION", "LayerResult", "MixResult", "ProbeResult"]
