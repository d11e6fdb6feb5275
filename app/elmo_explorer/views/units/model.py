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

    def view_state(self) -> Dict[str, Any]:
        return {"settings": self.settings.to_dict()}

    def restore(self, state: Any) -> None:
        if isinstance(state, dict):
            self.settings = UnitsSettings.from_dict(state.get("settings"))


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
