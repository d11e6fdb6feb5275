"""Inside the biLSTM: its internal states captured, and its units intervened on, per call.

A plain, step-by-step computation of :class:`~elmo_engine.model.lstm.LSTMStack` (the same
equations as the autograd path and :mod:`~elmo_engine.model.reference`: TensorFlow's
``LSTMCell`` with projection, gate blocks i, j, f, o, the +1 forget bias, cell and projection
clips, skip connections), run on the model's own weights, beside the fast path rather than
inside it: the packed inference path (:mod:`.lstm_packed`, :mod:`.cpu_fast`) is not touched, so
its outputs are the same bit for bit whether or not anything is captured
(``tests/engine/test_units_states.py``).

Everything is an argument of the call, nothing is stored on the model (the model is shared by
threads: docs/guide/engine.md, *Threads*):

* **capture** (:class:`Capture`): for chosen layers and directions, the states of every
  position, in sentence order: the cell ``c`` (after the clip), the gates ``i = σ(z_i)``,
  ``f = σ(z_f + 1)``, ``o = σ(z_o)``, the candidate ``g = tanh(z_j)``, the unprojected output
  ``m = o · tanh(c)`` (width D, the "memory cells" of the published models: 4,096) and the
  projected output ``h`` (width P, clipped; the layer's output before the skip connection).
  As float16 by default; the bytes are computed from the shapes and checked against
  ``max_bytes`` before anything is allocated (:func:`capture_bytes`).
* **interventions** (:class:`Intervention`): zero, clamp (set to a value) or scale chosen units
  of ``c``, ``m`` or ``h`` of one layer and direction, at every position or from a position on
  (in the direction's reading order: forward ``≥ t``, backward ``≤ t``); or patch the units at
  one position with values taken from another sentence (:func:`patch_from`), after which the
  recurrence goes on from the patched state. An intervened ``c`` or ``h`` is what the next step
  and the layer above read.

Positions are framed positions (``<S>`` = 0, the words 1 … n, ``</S>`` = n + 1).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, FrozenSet, Iterable, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

from elmo_engine.errors import InputError
from elmo_engine.sharing import model_lock
from elmo_engine.model.cpu_fast import both_directions
from elmo_engine.model.lstm_states import (ALL_STATES, DIRECTION_NAMES, INTERVENABLE, Op,  # noqa: F401
                                           StateKind, parse_states, state_width)

#: default bound on the captured states of one call
DEFAULT_MAX_BYTES = 1 << 30



@dataclass(frozen=True)
class Capture:
    """What to capture: ``layers`` and ``directions`` (None: all), the state ``kinds``, as
    ``dtype`` (float16 by default), at most ``max_bytes`` in all."""

    kinds: Tuple[StateKind, ...] = ALL_STATES
    layers: Optional[Tuple[int, ...]] = None
    directions: Tuple[int, ...] = (0, 1)
    dtype: torch.dtype = torch.float16
    max_bytes: int = DEFAULT_MAX_BYTES

    def keys(self, n_layers: int) -> List[Tuple[int, int]]:
        layers = range(n_layers) if self.layers is None else self.layers
        for layer in layers:
            if not 0 <= layer < n_layers:
                raise InputError(f"layer {layer} does not exist (the model has LSTM layers "
                                 f"0 … {n_layers - 1})")
        for d in self.directions:
            if d not in (0, 1):
                raise InputError(f"direction {d} does not exist (0 forward, 1 backward)")
        return [(layer, d) for layer in layers for d in self.directions]


def capture_bytes(opts, capture: Capture, batch: int, steps: int) -> int:
    """Bytes the states of ``capture`` take for ``batch`` rows of ``steps`` positions."""
    per_pos = sum(state_width(opts, k) for k in capture.kinds)
    item = torch.empty(0, dtype=capture.dtype).element_size()
    return len(capture.keys(opts.n_layers)) * batch * steps * per_pos * item


@dataclass(frozen=True, eq=False)
class Intervention:
    """A change to chosen units of one layer's and direction's state (module docstring).

    ``position``: a framed position, or None for every position (not for ``PATCH``);
    ``value``: the clamp value or the scale factor; ``source``: for ``PATCH``, the values to
    put in, (len(units),) for every row or (B, len(units)) per row; ``rows``: the batch rows it
    applies to (None: all)."""

    layer: int
    direction: int
    state: StateKind
    units: Tuple[int, ...]
    op: Op = Op.ZERO
    value: float = 0.0
    position: Optional[int] = None
    source: Optional[Tensor] = None
    rows: Optional[Tuple[int, ...]] = None

    def check(self, opts) -> None:
        if not 0 <= self.layer < opts.n_layers:
            raise InputError(f"intervention on layer {self.layer}: the model has LSTM layers "
                             f"0 … {opts.n_layers - 1}")
        if self.direction not in (0, 1):
            raise InputError(f"intervention direction {self.direction}: 0 forward, 1 backward")
        if self.state not in INTERVENABLE:
            raise InputError(f"an intervention changes c, m or h, not {self.state.value}")
        width = state_width(opts, self.state)
        bad = [u for u in self.units if not 0 <= u < width]
        if bad:
            raise InputError(f"unit {bad[0]} does not exist ({self.state.value} has {width} "
                             "units)")
        if self.op is Op.PATCH:
            if self.position is None or self.source is None:
                raise InputError("a patch needs a position and the values to put in")
            if self.source.shape[-1] != len(self.units):
                raise InputError(f"a patch of {len(self.units)} units got "
                                 f"{self.source.shape[-1]} values")


@dataclass
class InspectResult:
    """``layers`` (L+1, B, T, 2·out) float32 in the layout of :meth:`BiLM.contextual`
    (zero past each row's length; None for a ``states_only`` call); ``states[(layer,
    direction, kind)]`` (B, T, width) in sentence order, the capture's dtype (zero past each
    row's length)."""

    layers: Optional[Tensor]
    lengths: Tensor
    states: Dict[Tuple[int, int, StateKind], Tensor] = field(default_factory=dict)

    def outputs(self) -> Tensor:
        """``layers``, from a call that computed them (not ``states_only``)."""
        if self.layers is None:
            raise ValueError("a states_only call computes no layer outputs")
        return self.layers


def _applies(iv: Intervention, step: int, lengths: Tensor) -> Tensor:
    """(B,) bool: rows where ``iv`` acts at processing ``step`` of its direction."""
    pos = (torch.full_like(lengths, step) if iv.direction == 0
           else lengths - 1 - step)                                   # framed position per row
    valid = step < lengths
    act: Tensor
    if iv.op is Op.PATCH:
        act = torch.eq(pos, int(iv.position or 0))
    elif iv.position is None:
        act = torch.ones_like(valid)
    elif iv.direction == 0:
        act = pos >= iv.position
    else:
        act = pos <= iv.position
    act = act & valid
    if iv.rows is not None:
        keep = torch.zeros_like(act)
        keep[list(iv.rows)] = True
        act = act & keep
    return act


def _apply(iv: Intervention, x: Tensor, act: Tensor) -> None:
    """Change ``x`` (B, width) in place on the rows ``act``."""
    if not bool(act.any()):
        return
    rows = act.nonzero().squeeze(1)
    units = torch.tensor(iv.units, dtype=torch.long, device=x.device)
    sub = x[rows][:, units]                                           # (r, k)
    if iv.op is Op.ZERO:
        sub = torch.zeros_like(sub)
    elif iv.op is Op.CLAMP:
        sub = torch.full_like(sub, iv.value)
    elif iv.op is Op.SCALE:
        sub = sub * iv.value
    else:
        assert iv.source is not None                 # checked in Intervention.check
        src = iv.source.to(x.device, x.dtype)
        sub = src.expand(len(rows), -1) if src.dim() == 1 else src[rows]
    x[rows[:, None], units[None, :]] = sub


def inspect(model, tok: Tensor, lengths: Tensor, capture: Optional[Capture] = None,
            interventions: Sequence[Intervention] = (), states_only: bool = False
            ) -> InspectResult:
    """Run the biLSTM step by step over framed token vectors, capturing and intervening.

    Parameters
    ----------
    model : a :class:`~elmo_engine.model.bilm.BiLM` (only read)
    tok : (B, T, P) token vectors of framed sentences, as for :meth:`BiLM.contextual`
    lengths : (B,) framed lengths
    capture : the states to keep (None: none)
    interventions : the changes to make, in this call only
    states_only : compute only what the capture needs — its directions, up to its highest
        layer — and return no ``layers`` (a unit's values over a corpus: one direction of one
        layer runs in a quarter to a half of the full time). The states are the full run's:
        a direction never reads the other, a layer never the ones above it.

    Raises :class:`InputError` when the capture would exceed its ``max_bytes`` (before any
    allocation) or an intervention names a unit, layer or direction the model lacks.

    Holds the model's lock (:func:`elmo_engine.sharing.model_lock`) shared for the run: an
    embedder over the same model never moves it (the GPU out-of-memory fall-back) meanwhile.
    """
    with model_lock(model).shared():       # where the model is now (a move waits for this)
        here = next(model.parameters())
        tok = tok.to(here.device, here.dtype)
        return _inspect(model, tok, lengths, capture, interventions, states_only)


def _inspect(model, tok: Tensor, lengths: Tensor, capture: Optional[Capture],
             interventions: Sequence[Intervention], states_only: bool) -> InspectResult:
    from elmo_engine.model.bilm import reverse_index

    stack = model.lstm
    opts = stack.opts
    bsz, steps, _ = tok.shape
    lengths = lengths.to(tok.device)
    for iv in interventions:
        iv.check(opts)
    keys: List[Tuple[int, int]] = []
    if capture is not None:
        keys = capture.keys(opts.n_layers)
        need = capture_bytes(opts, capture, bsz, steps)
        if need > capture.max_bytes:
            raise InputError(f"capturing {', '.join(k.value for k in capture.kinds)} of "
                             f"{len(keys)} layer-directions for {bsz} × {steps} positions "
                             f"needs {need / 2 ** 20:.1f} MiB, over the bound of "
                             f"{capture.max_bytes / 2 ** 20:.1f} MiB; capture fewer sentences, "
                             "states or layers")
    wanted: FrozenSet[Tuple[int, int]] = frozenset(keys)
    if states_only and not keys:
        raise ValueError("states_only needs a capture of at least one layer and direction")
    # the layers each direction runs: all, or up to the highest one captured in it
    depth = {d: (max(layer for layer, dd in keys if dd == d) + 1 if states_only
                 else opts.n_layers)
             for d in ((0, 1) if not states_only else sorted({d for _, d in keys}))}
    rev = reverse_index(lengths, steps)                               # (B, T)
    tok_b = tok.gather(1, rev[:, :, None].expand_as(tok))
    mask = (torch.arange(steps, device=tok.device)[None, :] < lengths[:, None])  # (B, T)
    mask_f = mask.to(tok.dtype)[:, :, None]
    out_dim = opts.output_dim
    layers = None
    if not states_only:
        layers = tok.new_zeros(opts.n_layers + 1, bsz, steps, 2 * out_dim)
        layers[0] = torch.cat([tok, tok], -1) * mask_f
    states: Dict[Tuple[int, int, StateKind], Tensor] = {}
    def run(d: int) -> List[Tuple[Tensor, Dict[StateKind, Tensor]]]:
        """Every layer of direction ``d``: per layer its (T, B, out) output (skip included)
        and its captured states, time-major."""
        layer_in = (tok if d == 0 else tok_b).transpose(0, 1).contiguous()   # (T, B, P)
        done = []
        for layer in range(depth[d]):
            ivs = [iv for iv in interventions if iv.layer == layer and iv.direction == d]
            store: Dict[StateKind, Tensor] = {}
            if capture is not None and (layer, d) in wanted:
                for kind in capture.kinds:
                    store[kind] = torch.empty(steps, bsz, state_width(opts, kind),
                                              dtype=capture.dtype, device=tok.device)
            out = _layer(stack, layer, d, layer_in, lengths, ivs, store)   # (T, B, out)
            if opts.use_skip_connections and layer > 0:
                out = out + layer_in
            done.append((out, store))
            layer_in = out
        return done

    with torch.no_grad():
        if len(depth) == 2:
            per_direction = dict(enumerate(both_directions(run, tok.device, parallel=bsz >= 2)))
        else:                                  # one direction: every thread of the caller's
            per_direction = {d: run(d) for d in depth}
    for d, done in per_direction.items():
        for layer, (out_tm, store) in enumerate(done):
            if layers is not None:
                out = out_tm.transpose(0, 1)                              # (B, T, out)
                if d == 1:
                    out = out.gather(1, rev[:, :, None].expand_as(out))
                layers[layer + 1, :, :, d * out_dim:(d + 1) * out_dim] = out * mask_f
            for kind, held_tm in store.items():
                held = held_tm.transpose(0, 1)
                if d == 1:
                    held = held.gather(1, rev[:, :, None].expand_as(held))
                states[(layer, d, kind)] = held * mask.to(held.dtype)[:, :, None]
    return InspectResult(layers=layers, lengths=lengths, states=states)


def _layer(stack, layer: int, d: int, x: Tensor, lengths: Tensor, ivs: Sequence[Intervention],
           store: Dict[StateKind, Tensor]) -> Tensor:
    """One layer of direction ``d`` over time-major (T, B, in) rows that read from index 0:
    (T, B, out). The GEMMs go through the model's kernels (the recurrent one with the packed
    weight on the CPU, as the fast path does; read-only, shared by threads)."""
    opts = stack.opts
    kernels = stack.kernels
    dim = opts.lstm_dim
    steps, bsz, _ = x.shape
    w_rec = stack.w_rec[layer][d]
    wp = stack.wp[layer][d] if opts.has_lstm_projection else None
    bias = stack.b[layer][d] + stack.forget_bias[0]
    xp = torch.addmm(bias, x.reshape(steps * bsz, -1), stack.w_in[layer][d])
    xp = xp.view(steps, bsz, 4 * dim)
    packed = kernels.recurrent_weight(layer, d, stack.w_rec[layer], bsz)
    c = x.new_zeros(bsz, dim)
    h = x.new_zeros(bsz, opts.output_dim)
    outs = x.new_empty(steps, bsz, opts.output_dim)
    by_state = {k: [iv for iv in ivs if iv.state is k] for k in INTERVENABLE}
    for t in range(steps):
        z = xp[t] if t == 0 else kernels.add_recurrent(xp[t], h, w_rec, packed)  # i j f o
        # tanh(x) as 2·σ(2x) − 1, as the fast path computes it (one sigmoid pass for the gates)
        z[:, dim:2 * dim].mul_(2)
        z.sigmoid_()
        i, f, o = z[:, :dim], z[:, 2 * dim:3 * dim], z[:, 3 * dim:]
        g = z[:, dim:2 * dim].mul_(2).sub_(1)
        c = torch.addcmul(f * c, i, g)
        if opts.cell_clip is not None:
            c = c.clamp_(-opts.cell_clip, opts.cell_clip)
        for iv in by_state[StateKind.C]:
            _apply(iv, c, _applies(iv, t, lengths))
        m = torch.mul(c, 2).sigmoid_().mul_(2).sub_(1).mul_(o)                # o·tanh(c)
        for iv in by_state[StateKind.M]:
            _apply(iv, m, _applies(iv, t, lengths))
        h = outs[t]
        if wp is not None:
            torch.mm(m, wp, out=h)
            if opts.proj_clip is not None:
                h.clamp_(-opts.proj_clip, opts.proj_clip)
        else:
            h.copy_(m)
        for iv in by_state[StateKind.H]:
            _apply(iv, h, _applies(iv, t, lengths))
        if store:
            for kind, value in ((StateKind.C, c), (StateKind.IG, i), (StateKind.FG, f),
                                (StateKind.OG, o), (StateKind.G, g), (StateKind.M, m),
                                (StateKind.H, h)):
                held = store.get(kind)
                if held is not None:
                    held[t] = value
    return outs


def framed_tokens(model, sentences: Sequence[Sequence[str]], token_vectors=None
                  ) -> Tuple[Tensor, Tensor]:
    """(B, T, P) token vectors of ``<S> w1 … wn </S>`` per sentence and (B,) framed lengths.

    ``token_vectors``: a function from a list of word types to their (U, P) vectors (an
    embedder's cached :meth:`~elmo_engine.embed.embedder.Embedder.token_vectors`); by default
    the model's char-CNN is run on the types."""
    from elmo_engine.model.chars import BOS_TOKEN, EOS_TOKEN, char_ids_for_types

    framed = [[BOS_TOKEN, *s, EOS_TOKEN] for s in sentences]
    if not framed:
        raise InputError("no sentences")
    steps = max(len(f) for f in framed)
    types = sorted({t for f in framed for t in f})
    if token_vectors is not None:
        vec = torch.as_tensor(token_vectors(types)).float()
    else:
        ids = torch.from_numpy(char_ids_for_types(types, model.opts.max_characters_per_token))
        with model_lock(model).shared(), torch.no_grad():     # no move under the char-CNN
            vec = model.token_vectors(ids.to(model.device)).float().cpu()
    where = {t: k for k, t in enumerate(types)}
    tok = torch.zeros(len(framed), steps, vec.shape[1])
    for r, f in enumerate(framed):
        tok[r, :len(f)] = vec[[where[t] for t in f]]
    return tok.to(model.device, model.dtype), torch.tensor([len(f) for f in framed])


def patch_from(model, donor: Sequence[str], layer: int, direction: int, state: StateKind,
               position: int, units: Optional[Iterable[int]] = None,
               rows: Optional[Tuple[int, ...]] = None) -> Intervention:
    """An intervention that puts ``donor``'s ``state`` of ``layer`` and ``direction`` at framed
    ``position`` into the sentence(s) being run (all units by default): activation patching."""
    tok, lengths = framed_tokens(model, [donor])
    if not 0 <= position < int(lengths[0]):
        raise InputError(f"position {position} is outside the donor sentence (framed length "
                         f"{int(lengths[0])})")
    res = inspect(model, tok, lengths, Capture(kinds=(state,), layers=(layer,),
                                               directions=(direction,), dtype=torch.float32),
                  states_only=True)
    values = res.states[(layer, direction, state)][0, position]       # (width,)
    chosen = tuple(range(values.shape[0])) if units is None else tuple(units)
    return Intervention(layer, direction, state, chosen, Op.PATCH, position=position,
                        source=values[list(chosen)].clone(), rows=rows)
