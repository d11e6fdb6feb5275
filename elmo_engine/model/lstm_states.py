"""The kinds of an LSTM layer's internal states and of the interventions on them: the plain
names :mod:`.lstm_inspect` captures and changes, here without torch, so that a command checks
``--state`` and ``--unit`` against a checkpoint's options before it loads torch and the model.
"""
from __future__ import annotations

import enum
from typing import List, Tuple

from elmo_engine.errors import InputError

DIRECTION_NAMES = ("forward", "backward")


class StateKind(str, enum.Enum):
    """One kind of internal state of an LSTM layer (:mod:`.lstm_inspect` says what each is)."""

    C = "c"          # cell state, after the clip                    (D)
    IG = "i"         # input gate σ(z_i)                              (D)
    FG = "f"         # forget gate σ(z_f + 1)                         (D)
    OG = "o"         # output gate σ(z_o)                             (D)
    G = "g"          # candidate tanh(z_j)                            (D)
    M = "m"          # unprojected output o·tanh(c)                   (D)
    H = "h"          # projected output, clipped (= m without projection)  (P)


ALL_STATES: Tuple[StateKind, ...] = tuple(StateKind)
#: the states an intervention may change (the gates and g follow from them)
INTERVENABLE = (StateKind.C, StateKind.M, StateKind.H)


class Op(str, enum.Enum):
    ZERO = "zero"
    CLAMP = "clamp"       # set the units to ``value``
    SCALE = "scale"       # multiply the units by ``value``
    PATCH = "patch"       # set the units at one position to ``source`` (another sentence's)


def parse_states(text: str) -> Tuple[StateKind, ...]:
    """``"c,h"`` → (C, H); ``"all"`` → every kind. :class:`InputError` naming a bad one."""
    if text.strip() == "all":
        return ALL_STATES
    out: List[StateKind] = []
    for part in text.split(","):
        try:
            kind = StateKind(part.strip())
        except ValueError:
            raise InputError(f"unknown state {part.strip()!r}; choose from "
                             f"{', '.join(s.value for s in StateKind)} or 'all'") from None
        if kind not in out:
            out.append(kind)
    return tuple(out)


def state_width(model_opts, kind: StateKind) -> int:
    """D for every kind but ``h`` (P, or D without a projection)."""
    return model_opts.output_dim if kind is StateKind.H else model_opts.lstm_dim


__all__ = ["ALL_STATES", "DIRECTION_NAMES", "INTERVENABLE", "Op", "StateKind", "parse_states",
           "state_width"]
