"""Usefulness beside identity: every per-layer reading of one probe task in one table.

Per layer ``ℓ`` of one task: the per-layer probe's test score, its control-task selectivity
(Hewitt & Liang 2019, "Designing and Interpreting Probes with Control Tasks"), the online-code
MDL codelength of the training labels (Voita & Titov 2020, "Information-Theoretic Probing with
Minimum Description Length"), the full scalar-mix weight ``s_ℓ`` (mean ± sd over seeds), the
cumulative score of a mix probe on layers ``0 … ℓ`` and the gain ``Δ^(ℓ)`` when layer ``ℓ`` is
added (Tenney, Das & Pavlick 2019, "BERT Rediscovers the Classical NLP Pipeline", §3;
:mod:`.cumulative`). Two centres of gravity sum it up: ``E_s`` from the mix weights and ``E_Δ``
from the Δs. Tenney et al. read them side by side and found they can disagree: a mix weight says
how much *this probe* leaned on a layer, a Δ how much the layer *added* to the layers below it.

The readings **disagree** when ``|E_s − E_Δ| ≥`` :data:`DISAGREE_AT` (half a layer): then the
table carries one sentence saying so. :func:`run_usefulness` computes everything from ready-made
examples (the control task is always trained), and the result rides on the
:class:`~elmo_engine.analysis.probes.experiment.ProbeResult` as ``usefulness``.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, List, Optional, Sequence, TYPE_CHECKING

import numpy as np

from elmo_engine.progress import TaskState

if TYPE_CHECKING:                      # (results imports this module; cumulative needs torch)
    from elmo_engine.analysis.layers.mdl import MDLResult
    from elmo_engine.analysis.probes.cumulative import CumulativeResult
    from elmo_engine.analysis.probes.results import ProbeResult
    from elmo_engine.analysis.probes.settings import ProbeConfig
    from elmo_engine.analysis.probes.features import Examples

#: the two expected layers "point at different layers" when they are this far apart or more
DISAGREE_AT = 0.5
#: MDL's group table (groups × classes booleans) above this many cells is not built: a word-sense
#: task over all of SemCor (~20,000 lemmas × ~30,000 senses) would need gigabytes
MDL_MAX_CELLS = 50_000_000
TENNEY = "Tenney et al. 2019, “BERT Rediscovers the Classical NLP Pipeline”"
COLUMNS = ("task", "layer", "score", "selectivity", "MDL (kbit)", "compression", "mix weight",
           "cumulative 0..ℓ", "Δℓ")
DESCRIPTION = (
    "Usefulness beside identity (Tenney et al. 2019, §3). Per layer: 'score' (the per-layer "
    "probe's test score), 'selectivity' (task - control task, Hewitt & Liang 2019), "
    "'mdl_bits' / 'compression' (online codelength of the training labels given the layer, "
    "Voita & Titov 2020; one seed), 'weight' (the full scalar mix's weight s_l), 'cumulative' "
    "(test score of a scalar-mix probe on layers 0..l), 'delta' (cumulative[l] - "
    "cumulative[l-1]; none at layer 0); '_sd': sample sd over the seeds. "
    "'expected_from_weights' = sum_l l * s_l; 'expected_from_deltas' = sum_{l>=1} l * delta_l / "
    "sum_{l>=1} delta_l (null when the deltas sum to <= 0). 'disagree' is true when they differ "
    "by 0.5 layer or more; 'flag' says so in one sentence.")


@dataclass
class UsefulnessRow:
    """One layer's readings (None: not measured, e.g. no MDL for a task too large for it)."""

    layer: int
    score: float
    score_sd: float
    weight: float
    weight_sd: float
    cumulative: float
    cumulative_sd: float
    delta: Optional[float] = None
    delta_sd: Optional[float] = None
    selectivity: Optional[float] = None
    selectivity_sd: Optional[float] = None
    mdl_bits: Optional[float] = None
    compression: Optional[float] = None


@dataclass
class Usefulness:
    """One task's usefulness table, both expected layers and the disagreement flag."""

    task: str
    name: str
    rows: List[UsefulnessRow]
    expected_from_weights: float
    expected_from_weights_sd: float
    expected_from_deltas: Optional[float]
    expected_from_deltas_sd: Optional[float]
    disagree: bool
    flag: str
    seeds: List[int] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    description: str = DESCRIPTION

    @classmethod
    def from_dict(cls, d: Any) -> "Usefulness":
        """A table from its JSON; a ``ValueError`` naming the key when a field is wrong."""
        if not isinstance(d, dict):
            raise ValueError("key 'usefulness' must be an object")
        rows = d.get("rows")
        if not isinstance(rows, list) or not rows:
            raise ValueError("key 'usefulness.rows' must be a non-empty list")
        names = {f.name for f in fields(UsefulnessRow)}
        built = []
        for i, r in enumerate(rows):
            if not isinstance(r, dict):
                raise ValueError(f"key 'usefulness.rows[{i}]' must be an object")
            for k, v in r.items():
                if k in names and v is not None and not _finite(v):
                    raise ValueError(f"key 'usefulness.rows[{i}].{k}' must be a finite number")
            try:
                built.append(UsefulnessRow(**{k: v for k, v in r.items() if k in names}))
            except TypeError as e:
                raise ValueError(f"key 'usefulness.rows[{i}]': {e}") from None
        for key, optional in (("expected_from_weights", False), ("expected_from_weights_sd", False),
                              ("expected_from_deltas", True), ("expected_from_deltas_sd", True)):
            v = d.get(key)
            if (v is None and not optional) or (v is not None and not _finite(v)):
                raise ValueError(f"key 'usefulness.{key}' must be a finite number")
        for key, typ, want in (("task", str, "a string"), ("name", str, "a string"),
                               ("flag", str, "a string"), ("disagree", bool, "true/false")):
            if not isinstance(d.get(key), typ):
                raise ValueError(f"key 'usefulness.{key}' must be {want}")
        for key in ("seeds", "notes"):
            if not isinstance(d.get(key, []), list):
                raise ValueError(f"key 'usefulness.{key}' must be a list")
        own = {f.name for f in fields(cls)} - {"rows"}
        try:
            return cls(rows=built, **{k: v for k, v in d.items() if k in own})
        except TypeError as e:
            raise ValueError(f"key 'usefulness': {e}") from None


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def disagreement(e_weights: float, e_deltas: Optional[float], name: str) -> str:
    """The one-sentence flag when the two expected layers are :data:`DISAGREE_AT` apart or more;
    ``""`` when they agree or ``E_Δ`` is undefined."""
    if e_deltas is None or abs(e_weights - e_deltas) < DISAGREE_AT:
        return ""
    return (f"⚠ {name}: the mix weights centre on layer {e_weights:.2f} but the gains of "
            f"adding layers on layer {e_deltas:.2f} (|difference| "
            f"{abs(e_weights - e_deltas):.2f} ≥ {DISAGREE_AT}): how much a probe leans on a "
            f"layer and how much the layer adds differ ({TENNEY}).")


def usefulness_table(result: "ProbeResult", cum: "CumulativeResult",
                     mdl: Optional["MDLResult"] = None, notes: Sequence[str] = ()) -> Usefulness:
    """Assemble the table from a probe run (per-layer scores, selectivity, mix weights over
    seeds), its cumulative scores and, optionally, its MDL probes."""
    from elmo_engine.analysis.probes.cumulative import expected_layer_from_weights

    k = len(result.layers)
    if len(cum.scores) != k:
        raise ValueError(f"{len(cum.scores)} cumulative scores for {k} layers")
    w = np.asarray(result.mix.weights_per_seed or [result.mix.weights], np.float64)  # (S, K)
    own = [expected_layer_from_weights(row) for row in w]
    e_w = expected_layer_from_weights(result.mix.weights)
    e_w_sd = float(np.std(own, ddof=1)) if len(own) > 1 else 0.0
    rows = []
    for h, lay in enumerate(result.layers):
        code = mdl.layers[h] if mdl is not None else None
        rows.append(UsefulnessRow(
            h, lay.test, lay.test_sd, result.mix.weights[h],
            result.mix.weights_sd[h] if result.mix.weights_sd else 0.0,
            cum.scores[h], cum.scores_sd[h], cum.deltas[h], cum.deltas_sd[h],
            lay.selectivity, lay.selectivity_sd,
            None if code is None else code.online_bits,
            None if code is None else code.compression))
    e_d = cum.expected_layer
    out_notes = list(notes)
    flag = disagreement(e_w, e_d, result.name)
    return Usefulness(result.task, result.name, rows, e_w, e_w_sd, e_d, cum.expected_layer_sd,
                      bool(flag), flag, list(result.seeds), out_notes)


def _mdl(train: "Examples", wsd: bool, config: "ProbeConfig", state: Optional[TaskState]):
    """The online-code MDL probes of the training labels, or a note why there are none."""
    from elmo_engine.analysis.layers.mdl import MDLConfig, online_codelength

    groups = list(train.groups) if wsd else None
    cells = len(set(train.labels)) * (len(set(groups)) if groups else 1)
    if cells > MDL_MAX_CELLS:
        return None, (f"no MDL codelength: {len(set(train.labels)):,} labels in "
                      f"{len(set(groups or ['']))} groups is more than the online code's "
                      f"{MDL_MAX_CELLS:,}-cell table")
    res = online_codelength(train.features, train.labels, groups=groups,
                            config=MDLConfig(seed=config.seed, device=config.device, mix=False),
                            state=state)
    return res, None


def run_usefulness(train: "Examples", dev: "Examples", test: "Examples", config: "ProbeConfig",
                   task: str, name: str = "", label: str = "", model: str = "",
                   state: Optional[TaskState] = None, on_event=None,
                   mdl: bool = True) -> "ProbeResult":
    """:func:`~elmo_engine.analysis.probes.experiment.run_probe` with the control task, then the
    cumulative probes (:func:`~.cumulative.cumulative_scores`, the same seeds) and the MDL
    probes of the training labels (``mdl``; seed ``config.seed``); the result's ``usefulness``
    holds the table. Progress and cancel through ``state``."""
    import time

    from elmo_engine.analysis.probes.classifiers import Normaliser
    from elmo_engine.analysis.probes.cumulative import cumulative_scores
    from elmo_engine.analysis.probes.experiment import run_probe
    from elmo_engine.analysis.probes.kinds import TaskKind

    kind = TaskKind.of(task)
    cfg = replace(config, control=True)
    result = run_probe(train, dev, test, cfg, kind, name, label, model, state, on_event)
    t0 = time.perf_counter()
    norm = Normaliser(train.features, cfg.layer_norm)
    cum = cumulative_scores(train, dev, test, norm, cfg, result.seeds, kind.scoring,
                            result.mix.test_per_seed, state, on_event)
    notes: List[str] = []
    code = None
    if mdl:
        code, why = _mdl(train, kind.is_wsd, cfg, state)
        if why:
            notes.append(why)
    result.usefulness = usefulness_table(result, cum, code, notes)
    spent = time.perf_counter() - t0
    result.timings["training_s"] = result.timings.get("training_s", 0.0) + spent
    result.wall_time_s += spent
    result.config["cumulative"] = True
    return result


def table_rows(tables: Sequence[Usefulness]) -> List[List[str]]:
    """One row of :data:`COLUMNS` per layer of every table (the view's table and the TSV)."""
    from elmo_engine.analysis.probes.tables import pm

    def opt(v: Optional[float], sd: Optional[float] = None, digits: int = 4) -> str:
        return "—" if v is None else pm(v, sd, digits)
    out = []
    for t in tables:
        for r in t.rows:
            out.append([t.name, str(r.layer), pm(r.score, r.score_sd),
                        opt(r.selectivity, r.selectivity_sd),
                        "—" if r.mdl_bits is None else f"{r.mdl_bits / 1000:.2f}",
                        "—" if r.compression is None else f"{r.compression:.2f}",
                        pm(r.weight, r.weight_sd), pm(r.cumulative, r.cumulative_sd),
                        opt(r.delta, r.delta_sd)])
    return out


def summary_lines(t: Usefulness) -> List[str]:
    """Both expected layers and the flag, as lines of text."""
    e_d = ("undefined (the layers after 0 add nothing in total: Σ Δ ≤ 0)" if t.expected_from_deltas is None
           else _pm(t.expected_from_deltas, t.expected_from_deltas_sd))
    lines = [f"{t.name}: expected layer from the mix weights "
             f"{_pm(t.expected_from_weights, t.expected_from_weights_sd)}, from the Δs {e_d}"]
    if t.flag:
        lines.append(t.flag)
    return lines + [f"note: {n}" for n in t.notes]


def usefulness_text(t: Usefulness) -> str:
    """The table as fixed-width text (the ``probe --cumulative`` output), then both expected
    layers and the flag."""
    rows = [list(COLUMNS[1:])] + [r[1:] for r in table_rows([t])]
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    lines = [f"usefulness beside identity — {t.name} (Tenney et al. 2019; MDL: Voita & Titov "
             "2020; selectivity: Hewitt & Liang 2019)"]
    lines += ["  ".join(v.rjust(wd) for v, wd in zip(r, widths)) for r in rows]
    return "\n".join(lines + summary_lines(t))


def _pm(v: float, sd: Optional[float]) -> str:
    return f"{v:.2f}" + ("" if sd is None else f" ± {sd:.2f}")


def write_usefulness_tsv(tables: Sequence[Usefulness], path) -> None:
    """The table (:func:`table_rows`) as UTF-8 TSV with each task's two expected layers in the
    last two columns (empty: undefined), written atomically."""
    from elmo_engine.atomic import atomic_write_text

    head = list(COLUMNS) + ["expected layer (weights)", "expected layer (Δs)"]
    lines = ["\t".join(head)]
    rows = iter(table_rows(tables))
    for t in tables:
        e_d = "" if t.expected_from_deltas is None else f"{t.expected_from_deltas:.4f}"
        for _ in t.rows:
            lines.append("\t".join(next(rows) + [f"{t.expected_from_weights:.4f}", e_d]))
    atomic_write_text(path, "\n".join(lines) + "\n")


def to_dict(t: Usefulness) -> dict:
    """The table's JSON (also inside a probe result as ``usefulness``)."""
    d = asdict(t)
    return {"description": d.pop("description"), **d}


__all__ = ["COLUMNS", "DISAGREE_AT", "Usefulness", "UsefulnessRow", "disagreement",
           "run_usefulness", "summary_lines", "table_rows", "to_dict", "usefulness_table",
           "usefulness_text", "write_usefulness_tsv"]
