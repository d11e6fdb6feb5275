"""How many units an ablation switches off (Lakretz et al. 2019's top k against k random).

The control draws k units outside the top k, so a state of ``width`` units takes at most
``width / 2``: :func:`check_ks` refuses a k the user asked for over it, :func:`fitting_ks` keeps
those of the defaults that fit (a model of 24 cells takes 1, 2, 4 and 8 of
:data:`DEFAULT_KS`). Imports nothing heavy: the app names the defaults without torch.
"""
from __future__ import annotations

from typing import Sequence, Tuple

from elmo_engine.errors import InputError
from elmo_engine.model.lstm_states import StateKind

#: the numbers of units ablated by default (``units ablate``, the app's Number units), of
#: which those a state's width allows are taken (:func:`fitting_ks`)
DEFAULT_KS: Tuple[int, ...] = (1, 2, 4, 8, 16)


def fitting_ks(ks: Sequence[int], width: int) -> Tuple[int, ...]:
    """The ``ks`` the experiment can draw its control for in a state of ``width`` units
    (:func:`check_ks`: at most half of them): a model of 24 cells takes 1, 2, 4 and 8 of the
    defaults."""
    return tuple(k for k in ks if 1 <= k <= width // 2)


def default_ks(width: int, layer: int, state: StateKind) -> Tuple[int, ...]:
    """The :data:`DEFAULT_KS` a state of ``width`` units allows; :class:`InputError` when none
    does (fewer than 2 units)."""
    ks = fitting_ks(DEFAULT_KS, width)
    if not ks:
        raise InputError(f"layer {layer}'s {state.value} has {width} units: too few to set k of "
                         "them against k others")
    return ks


def check_ks(ks: Sequence[int], width: int, layer: int, state: StateKind) -> None:
    """Refuse a k the experiment cannot draw its control for: k random units among the
    ``width − k`` outside the top k needs ``k ≤ width / 2`` (above it the "random" units were
    the complement of the top k, or none)."""
    over = [k for k in ks if not 1 <= k <= width // 2]
    if over:
        raise InputError(f"--k {over[0]}: layer {layer}'s {state.value} has {width} units, and "
                         "the random control draws k of the units outside the top k; at most "
                         f"{width // 2}")


__all__ = ["DEFAULT_KS", "check_ks", "default_ks", "fitting_ks"]
