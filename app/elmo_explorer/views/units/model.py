"""The Units view's state, without Qt: its settings, the selected sentence's internal states and
the last ranking, and the engine calls that make them (run on the worker by the controller).

The sentence rows: for the chosen layer, direction and state kind, the units whose values vary
most over the sentence's words, as a (units × words) matrix; beside them the mean forget and
input gate per word (how much the cells keep and how much they take in). The ranking: units
of every layer, direction and state ranked for the bundled demo POS task
(:mod:`elmo_engine.analysis.units`), with the top-k against random-k curve.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

DIRECTIONS = ("forward", "backward")
STATES = ("c", "i", "f", "o", "g", "m", "h")
STATE_NAMES = {"c": "cell c", "i": "input gate i", "f": "forget gate f", "o": "output gate o",
               "g": "candidate g", "m": "unprojected output m", "h": "projected output h"}
RANK_KS = (1, 4, 16, 64)
RANK_TOKENS = 20_000


@dataclass
class UnitsSettings:
    """What the sentence rows show (saved with a workspace)."""

    layer: int = 0
    direction: str = "forward"
    state: str = "c"
    rows: int = 24

    @classmethod
    def from_dict(cls, d: Any) -> "UnitsSettings":
        out = cls()
        if not isinstance(d, dict):
            return out
        if isinstance(d.get("layer"), int) and 0 <= d["layer"] < 64:
            out.layer = d["layer"]
        if d.get("direction") in DIRECTIONS:
            out.direction = d["direction"]
        if d.get("state") in STATES:
            out.state = d["state"]
        if isinstance(d.get("rows"), int) and 1 <= d["rows"] <= 256:
            out.rows = d["rows"]
        return out

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


@dataclass
class SentenceRows:
    """One sentence's top units: ``values`` (units × words), ``units`` their ids, and the mean
    forget and input gates per word."""

    tokens: Tuple[str, ...]
    units: Tuple[int, ...]
    values: np.ndarray
    forget: np.ndarray
    input: np.ndarray
    settings: UnitsSettings


@dataclass
class UnitsModel:
    settings: UnitsSettings = field(default_factory=UnitsSettings)
    sentence: Optional[SentenceRows] = None
    ranking: List[Dict[str, Any]] = field(default_factory=list)
    remeasure: Optional[Any] = None          # the last Remeasure
    showcase: List[Dict[str, Any]] = field(default_factory=list)
    showcase_note: str = ""
    contexts: Optional[Any] = None           # the last UnitContexts
    pattern: Optional[Any] = None            # the last PatternResult

    #: the intervention panel's fields as typed (units as text) and the Unit tab's choice
    panel: Dict[str, Any] = field(default_factory=dict)

    def view_state(self) -> Dict[str, Any]:
        return {"settings": self.settings.to_dict(), "panel": dict(self.panel)}

    def restore(self, state: Any) -> None:
        if isinstance(state, dict):
            self.settings = UnitsSettings.from_dict(state.get("settings"))
            self.panel = panel_from_dict(state.get("panel"))


def panel_from_dict(d: Any) -> Dict[str, Any]:
    """The saved panel fields that are valid (anything else is dropped, never an error)."""
    out: Dict[str, Any] = {}
    if not isinstance(d, dict):
        return out
    checks = {"layer": lambda v: isinstance(v, int) and 0 <= v < 64,
              "direction": lambda v: v in INTERVENE_DIRECTIONS,
              "state": lambda v: v in INTERVENE_STATES,
              "units": lambda v: isinstance(v, str) and len(v) <= 10_000,
              "op": lambda v: v in OPS,
              "value": lambda v: isinstance(v, (int, float)) and abs(v) <= 100,
              "position": lambda v: isinstance(v, int) and 0 <= v <= 10_000,
              "donor": lambda v: isinstance(v, str) and len(v) <= 10_000,
              "unit_layer": lambda v: isinstance(v, int) and 0 <= v < 64,
              "unit_direction": lambda v: v in DIRECTIONS,
              "unit_state": lambda v: v in STATES,
              "unit": lambda v: isinstance(v, int) and 0 <= v <= 100_000}
    for key, ok in checks.items():
        v = d.get(key)
        if v is not None and not isinstance(v, bool) and ok(v):
            out[key] = v
    return out


def sentence_rows(model, tokens: Sequence[str], settings: UnitsSettings) -> SentenceRows:
    """The engine's states of ``tokens`` for ``settings`` (runs the model: call on the worker)."""
    import torch

    from elmo_engine.model.lstm_inspect import Capture, StateKind, framed_tokens, inspect

    kind = StateKind(settings.state)
    d = DIRECTIONS.index(settings.direction)
    layer = min(settings.layer, model.opts.n_layers - 1)
    kinds = tuple(dict.fromkeys((kind, StateKind.FG, StateKind.IG)))
    tok, lengths = framed_tokens(model, [list(tokens)])
    res = inspect(model, tok.to(model.device), lengths,
                  Capture(kinds=kinds, layers=(layer,), directions=(d,), dtype=torch.float32))
    n = len(tokens)

    def words(k) -> np.ndarray:
        return res.states[(layer, d, k)][0, 1:n + 1].cpu().numpy()      # (n, width)

    values = words(kind)
    units = top_units(values, settings.rows)
    return SentenceRows(tokens=tuple(tokens), units=units, values=values[:, list(units)].T,
                        forget=words(StateKind.FG).mean(1), input=words(StateKind.IG).mean(1),
                        settings=UnitsSettings(layer, settings.direction, settings.state,
                                               settings.rows))


def top_units(values: np.ndarray, rows: int) -> Tuple[int, ...]:
    """The ``rows`` units (columns of ``values``, words × units) that vary most over the words,
    then by largest mean magnitude; ties by id."""
    spread = values.std(0) if values.shape[0] > 1 else np.abs(values).mean(0)
    order = np.lexsort((np.arange(values.shape[1]), -np.abs(values).mean(0), -spread))
    return tuple(int(u) for u in order[:rows])


def rank_demo_pos(model, token_vectors=None, state=None) -> List[Dict[str, Any]]:
    """Units of every layer and direction (c and h) ranked for the demo POS task's UPOS tags
    (its first :data:`RANK_TOKENS` tokens), with the top-k curve: rows for the table."""
    from elmo_engine.analysis.units import RankSettings, collect, rank_units
    from elmo_engine.io.datasets.demo import load_demo_task
    from elmo_engine.model.lstm_inspect import StateKind

    sents = load_demo_task("pos", "train")
    data = collect(model, sents, [StateKind.C, StateKind.H], max_tokens=RANK_TOKENS,
                   token_vectors=token_vectors, state=state)
    results = rank_units(data, RankSettings(ks=RANK_KS, seeds=3), state=state)
    return ranking_rows(results)


def ranking_rows(results) -> List[Dict[str, Any]]:
    """One row per layer, direction and state: accuracy on all units, the majority baseline,
    the top units of each method and the curve (top vs random mean per k, class-mean diff)."""
    rows = []
    for r in results:
        layer, d, kind = r.key
        curve = {p.k: (p.top, float(np.mean(p.random))) for p in r.curve
                 if p.method.value == "mean-diff"}
        rows.append({"layer": layer, "direction": DIRECTIONS[d], "state": kind.value,
                     "all": r.full, "majority": r.majority,
                     "top": {m.value: [int(u) for u in r.order[m][:5]] for m in r.order},
                     "curve": {str(k): list(v) for k, v in curve.items()}})
    return rows


# ---- the intervention panel -------------------------------------------------------------------
OPS = ("zero", "clamp", "scale", "patch")
INTERVENE_DIRECTIONS = ("forward", "backward", "both")
INTERVENE_STATES = ("c", "m", "h")
#: the Number showcase: units ablated, random draws, labelled words ranked on
SHOWCASE_KS = (1, 2, 4, 8, 16)
SHOWCASE_SEEDS = 3
SHOWCASE_TOKENS = 20_000


@dataclass(frozen=True)
class InterventionSpec:
    """What the panel changes: ``units`` of ``state`` in ``layer`` of one or both directions;
    ``op`` zero / clamp (to ``value``) / scale (by ``value``) / patch (the ``donor`` sentence's
    values at framed ``position``). ``position`` 0: every position (zero, clamp, scale); t ≥ 1:
    from word t on in the direction's reading order."""

    layer: int = 1
    direction: str = "forward"
    state: str = "c"
    units: Tuple[int, ...] = ()
    op: str = "zero"
    value: float = 0.0
    position: int = 0
    donor: str = ""

    def describe(self) -> str:
        what = {"zero": "zeroed", "clamp": f"clamped to {self.value:g}",
                "scale": f"scaled by {self.value:g}",
                "patch": f"patched from “{self.donor}”"}[self.op]
        where = "at every position" if self.position == 0 else f"from word {self.position} on"
        shown = " ".join(map(str, self.units[:12])) + (" …" if len(self.units) > 12 else "")
        return (f"layer {self.layer} {self.direction} {self.state}, units {shown} {what} "
                f"{where}")


def parse_units(text: str) -> Tuple[int, ...]:
    """Unit numbers typed as ``3 17 40-45`` or ``3,17``: sorted, each once; InputError with
    the offending piece."""
    from elmo_engine.errors import InputError

    out: set = set()
    for piece in text.replace(",", " ").split():
        a, sep, b = piece.partition("-")
        try:
            lo, hi = int(a), int(b) if sep else int(a)
        except ValueError:
            raise InputError(f"units: {piece!r} is not a unit number or a range a-b") from None
        if lo < 0 or hi < lo or hi - lo > 100_000:
            raise InputError(f"units: {piece!r} is not a range of unit numbers")
        out.update(range(lo, hi + 1))
    if not out:
        raise InputError("units: give at least one unit number (e.g. 78 403)")
    return tuple(sorted(out))


def build_interventions(model, spec: InterventionSpec, token_vectors=None) -> List[Any]:
    """The engine's :class:`~elmo_engine.model.lstm_inspect.Intervention` list of ``spec``
    (checked against the model: a bad layer or unit is an InputError naming it)."""
    from elmo_engine.errors import InputError
    from elmo_engine.model.lstm_inspect import Intervention, Op, StateKind, patch_from

    kind = StateKind(spec.state)
    dirs = (0, 1) if spec.direction == "both" else (DIRECTIONS.index(spec.direction),)
    out = []
    for d in dirs:
        if spec.op == "patch":
            donor = spec.donor.split()
            if not donor:
                raise InputError("patch: type the sentence to patch from")
            if spec.position < 1:
                raise InputError("patch: choose the word position to patch at (1 or more)")
            iv = patch_from(model, donor, spec.layer, d, kind, spec.position, spec.units)
        else:
            iv = Intervention(spec.layer, d, kind, spec.units, Op(spec.op), value=spec.value,
                              position=spec.position or None)
        iv.check(model.opts)
        out.append(iv)
    return out


@dataclass
class Remeasure:
    """Before / after one intervention: the selected sentence word by word (both LMs'
    surprisal and top prediction) and the bundled minimal pairs' accuracies per set."""

    spec: InterventionSpec
    before: Any                       # elmo_engine.analysis.units.WordPredictions
    after: Any
    pairs_before: Any                 # elmo_engine.analysis.units.Accuracy
    pairs_after: Any


def bundled_minimal_pairs() -> List[Any]:
    from elmo_engine.analysis.language_model.pairs import bundled_pairs, read_pairs

    return [p for f in bundled_pairs() for p in read_pairs(f)]


def remeasure(model, softmax, tokens: Sequence[str], spec: InterventionSpec,
              pairs: Sequence[Any], token_vectors=None, state=None) -> Remeasure:
    """Run ``spec`` on the live biLM (on the worker): before and after, side by side."""
    from elmo_engine.analysis.units import pair_accuracy, token_predictions
    from elmo_engine.progress import check, report

    if spec.position > len(tokens) + 1:
        from elmo_engine.errors import InputError

        raise InputError(f"position {spec.position}: the sentence has words 1 … {len(tokens)}")
    ivs = build_interventions(model, spec, token_vectors)
    report(state, 0, 4, "the sentence before")
    before = token_predictions(model, softmax, tokens, (), token_vectors)
    check(state)
    report(state, 1, 4, "the sentence after")
    after = token_predictions(model, softmax, tokens, ivs, token_vectors)
    check(state)
    report(state, 2, 4, "the minimal pairs before")
    pb = pair_accuracy(model, softmax, pairs, (), token_vectors)
    check(state)
    report(state, 3, 4, "the minimal pairs after")
    pa = pair_accuracy(model, softmax, pairs, ivs, token_vectors)
    return Remeasure(spec=spec, before=before, after=after, pairs_before=pb, pairs_after=pa)


def showcase_rows(src, res) -> List[Dict[str, Any]]:
    """The Number showcase's table: per set (all first) the baseline and, per k, each LM's
    accuracy with its top-k cells zeroed and mean ± sd with k random cells zeroed."""
    from elmo_engine.analysis.units.ablate import ALL

    sets = [ALL] + [s for s in res.baseline.by_set if s != ALL]
    rows = []
    for s in sets:
        rows.append({"set": s, "k": 0, "top": list(res.baseline.by_set[s]), "random": None})
        for row in res.rows:
            rows.append({"set": s, "k": row.k, "top": list(row.top.by_set[s]),
                         "random": [list(v) for v in row.random_stats(s)]})
    return rows


def number_showcase(model, softmax, token_vectors=None, state=None, ks=SHOWCASE_KS,
                    seeds=SHOWCASE_SEEDS, max_tokens=SHOWCASE_TOKENS):
    """``units ablate``'s computation on the bundled data (EWT train's Number beside the
    checkout, else the demo POS task) and the bundled minimal pairs: (source, result)."""
    from elmo_engine.analysis.units.ablate import number_units_experiment

    return number_units_experiment(model, softmax, bundled_minimal_pairs(), ks, seeds,
                                   max_tokens, token_vectors=token_vectors, task=state)


# ---- one unit's contexts ----------------------------------------------------------------------
#: words of the reference corpus a unit's contexts are found in, and lines shown
CONTEXT_TOKENS = 30_000
CONTEXT_SHOW = 25


@dataclass(frozen=True)
class UnitChoice:
    layer: int = 1
    direction: str = "forward"
    state: str = "c"
    unit: int = 0

    def describe(self) -> str:
        return f"unit {self.unit} of layer {self.layer} {self.direction} {STATE_NAMES[self.state]}"


@dataclass
class UnitContexts:
    """A unit over the reference corpus: its highest and lowest positions (keyword in
    context), the ``positions`` looked at, and (when a ranking is shown) its values per demo
    POS tag as a histogram."""

    choice: UnitChoice
    positions: int
    highest: List[Any]                # elmo_engine.analysis.units.contexts.Context
    lowest: List[Any]
    histogram: Optional[Any] = None   # elmo_engine.analysis.units.contexts.LabelHistogram


def unit_contexts(model, choice: UnitChoice, with_labels: bool, token_vectors=None,
                  state=None) -> UnitContexts:
    """The unit's top contexts over the bundled reference corpus (its first
    :data:`CONTEXT_TOKENS` words), and with ``with_labels`` its histogram per UPOS tag on the
    demo POS words the ranking used (run on the worker)."""
    from elmo_engine.analysis.layers.run import reference_corpus_path
    from elmo_engine.analysis.units.contexts import label_histogram, top_contexts, unit_values
    from elmo_engine.io.datasets.text_input import read_text_input
    from elmo_engine.model.lstm_inspect import StateKind

    kind = StateKind(choice.state)
    d = DIRECTIONS.index(choice.direction)
    sents, count = [], 0
    for sent in read_text_input(reference_corpus_path()).tokens:     # its first words
        if count >= CONTEXT_TOKENS:
            break
        sents.append(sent)
        count += len(sent)
    values = unit_values(model, sents, choice.layer, d, kind, choice.unit, token_vectors, state)
    hist = None
    if with_labels:
        from elmo_engine.io.datasets.demo import load_demo_task

        labelled, count = [], 0
        for s in load_demo_task("pos", "train"):
            labelled.append(s)
            count += len(s)
            if count >= RANK_TOKENS:
                break
        lv = unit_values(model, [s.tokens for s in labelled], choice.layer, d, kind,
                         choice.unit, token_vectors, state)
        hist = label_histogram([s.labels for s in labelled], lv)
    return UnitContexts(choice=choice, positions=sum(len(v) for v in values),
                        highest=top_contexts(sents, values, CONTEXT_SHOW),
                        lowest=top_contexts(sents, values, CONTEXT_SHOW, lowest=True),
                        histogram=hist)


# ---- pattern search ---------------------------------------------------------------------------
PATTERN_SHOW = 30


@dataclass(frozen=True)
class PatternQuery:
    """A span of the selected sentence (words ``start`` … ``end``, 1-based, inclusive) and
    the threshold above which a unit of ``layer``/``direction``/``state`` is on."""

    layer: int = 1
    direction: str = "forward"
    state: str = "c"
    start: int = 1
    end: int = 1
    threshold: float = 0.3


def pattern_corpus() -> Tuple[List[List[str]], List[List[Optional[str]]]]:
    """The corpus the view searches: the demo POS task's sentences (EWT, with their UPOS) up
    to :data:`RANK_TOKENS` words."""
    from elmo_engine.io.datasets.demo import load_demo_task

    sents: List[List[str]] = []
    labels: List[List[Optional[str]]] = []
    count = 0
    for s in load_demo_task("pos", "train"):
        sents.append(list(s.tokens))
        labels.append(list(s.labels))
        count += len(s)
        if count >= RANK_TOKENS:
            break
    return sents, labels


def pattern_search(model, tokens: Sequence[str], q: PatternQuery, token_vectors=None,
                   state=None):
    """:func:`elmo_engine.analysis.units.pattern.find_pattern` of ``q`` over
    :func:`pattern_corpus` (run on the worker)."""
    from elmo_engine.analysis.units.pattern import find_pattern
    from elmo_engine.model.lstm_inspect import StateKind

    sents, labels = pattern_corpus()
    return find_pattern(model, list(tokens), (q.start, q.end), q.threshold, q.layer,
                        DIRECTIONS.index(q.direction), StateKind(q.state), sents, labels=labels,
                        show=PATTERN_SHOW, token_vectors=token_vectors, task=state)
