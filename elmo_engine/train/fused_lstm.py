"""One LSTM layer of both directions for training, with a hand-written backward pass.

The biLM's autograd path (:meth:`elmo_engine.model.bilm.LSTMStack.forward` with grad enabled)
records about thirty small operations per time step and direction; their bookkeeping, and a weight
gradient GEMM of a few rows at every step, cost more than the arithmetic. Here one
:class:`torch.autograd.Function` runs a whole layer of a window (T steps, B rows, both
directions) and computes the same gradients itself:

- the input projection of every step is one GEMM before the loop; for layer 0, whose input is
  the token layer, it is computed once per distinct word type of the window and gathered per
  step (its gradients are summed per type before their GEMMs, so those GEMMs have a row per
  type, not per token);
- the loop keeps only the sequential work: per step the recurrent GEMM, the gate arithmetic in
  place in preallocated buffers, the projection GEMM and the clips;
- the backward loop does only what depends on the next step: per step two GEMMs (into the
  projection and into the recurrent input) and a few fused multiplications with factors
  precomputed for all steps at once;
- the weight gradients are one GEMM each over all T·B rows, after the loop;
- the forward and backward LMs run side by side in two threads, a core each
  (:func:`elmo_engine.model.cpu_fast.both_directions`);
- mixed precision (``train-lm --precision bf16``, under ``torch.autocast``): every GEMM takes
  bf16 operands (the weights cast once per call) and its product is added to float32 buffers;
  the gate arithmetic, the cell state, the master weights and their gradients stay float32
  (:class:`_Gemms`).

The computation is exactly that of :class:`elmo_engine.model.bilm.LSTMStack` (TensorFlow's
``LSTMCell`` with projection: gate order i, j, f, o, forget bias +1, cell clip, projection clip),
up to float rounding; ``tests/engine/test_lm_train_fused.py`` checks outputs and every gradient
against the autograd path. Clipped values pass no gradient, as with ``torch.clamp`` (a value exactly
on the bound passes it). Windows have every row running at every step (the trainer's streams), so
there is no ragged batch here; the final state is returned for carrying to the next window and is
not differentiable.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

import torch
from torch import Tensor

from elmo_engine.model.cpu_fast import both_directions


class _Gemms:
    """The layer's GEMMs in float32, or with ``lowp`` (bf16) operands and float32 results.

    torch has no CPU GEMM of bf16 operands into a float32 output, so a bf16 product is
    computed, then added to (or copied into) the float32 buffer; operands are cast on the way
    in, the weights once per call (:meth:`w`)."""

    def __init__(self, lowp: Optional[torch.dtype]):
        self.lowp = lowp

    def w(self, t: Tensor) -> Tensor:
        """A weight as the GEMMs take it (cast once per call)."""
        return t if self.lowp is None else t.to(self.lowp)

    def a(self, t: Tensor) -> Tensor:
        return t if self.lowp is None or t.dtype == self.lowp else t.to(self.lowp)

    def addmm_(self, out: Tensor, a: Tensor, b: Tensor) -> Tensor:
        """``out += a @ b`` (b from :meth:`w`, or an activation)."""
        if self.lowp is None:
            return out.addmm_(a, b)
        return out.add_(torch.mm(self.a(a), self.a(b)))

    def mm(self, a: Tensor, b: Tensor, out: Optional[Tensor] = None) -> Tensor:
        """``a @ b`` as float32 (into ``out`` when given)."""
        if self.lowp is None:
            return torch.mm(a, b, out=out) if out is not None else torch.mm(a, b)
        prod = torch.mm(self.a(a), self.a(b))
        return out.copy_(prod) if out is not None else prod.float()

    def addmm(self, bias: Tensor, a: Tensor, b: Tensor, out: Optional[Tensor] = None) -> Tensor:
        """``bias + a @ b`` as float32 (into ``out`` when given)."""
        if self.lowp is None:
            return torch.addmm(bias, a, b, out=out) if out is not None else torch.addmm(bias, a, b)
        prod = torch.mm(self.a(a), self.a(b))
        if out is None:
            return prod.float().add_(bias)
        return torch.add(prod, bias, out=out)            # converted and added in one pass


def autocast_dtype(device: torch.device) -> Optional[torch.dtype]:
    """The lower precision the caller's ``torch.autocast`` asks for on ``device``, or None."""
    kind = device.type
    if not torch.is_autocast_enabled(kind):
        return None
    return torch.get_autocast_dtype(kind)


class _Saved:
    """What one direction's forward keeps for its backward."""

    __slots__ = ("gates", "c_pre", "c", "tc", "m", "h_pre", "h")

    def __init__(self, gates, c_pre, c, tc, m, h_pre, h):
        self.gates, self.c_pre, self.c, self.tc = gates, c_pre, c, tc
        self.m, self.h_pre, self.h = m, h_pre, h


def _tanh_(x: Tensor) -> Tensor:
    """``tanh`` in place as ``2·σ(2x) − 1``: on the CPU torch's sigmoid is about twice as fast
    as its tanh (0.27 against 0.55 ms for 128×1024 floats on one core); the two agree to
    2e-7."""
    return x.mul_(2).sigmoid_().mul_(2).sub_(1)


def _chunk_steps(rows: int, steps: int) -> int:
    """Steps per input-projection and weight-gradient GEMM: about ``CHUNK_ROWS`` rows, so that
    their operands stay in the last-level cache (a 2560×128 by 128×4096 GEMM ran at 38 GFLOP/s
    on one core here, 640 rows at 63)."""
    return max(1, min(steps, CHUNK_ROWS // max(rows, 1)))


CHUNK_ROWS = 640


def _clip(src: Tensor, bound: Optional[float], out: Tensor) -> Tensor:
    if bound is None:
        return src
    return torch.clamp(src, -bound, bound, out=out)


class FusedLSTMLayer(torch.autograd.Function):
    """Both directions of one LSTM layer over a (T, B) window; see the module docstring.

    ``forward(x, w_in, w_rec, b, wp, c0, h0, idx, steps, cell_clip, proj_clip, lowp)``:

    x : (2, T·B, in) the inputs of each direction, rows time-major (row t·B + r); or, when
        ``idx`` is given, (U, in) rows shared by both directions, row k of direction d being
        ``x[idx[d, k]]``
    w_in (2, in, 4D), w_rec (2, P, 4D), b (2, 4D) (without the forget bias), wp (2, D, P) or
        None (no projection: P = D); c0 (2, B, D), h0 (2, B, P): the carried state
    idx : (2, T·B) int64 or None
    steps : T
    lowp : None (float32 GEMMs) or the GEMMs' operand type (torch.bfloat16); see :class:`_Gemms`

    Returns the outputs (2, T·B, P) and the final state c (2, B, D), h (2, B, P).
    """

    @staticmethod
    def forward(ctx, x, w_in, w_rec, b, wp, c0, h0, idx, steps, cell_clip, proj_clip,
                lowp=None):
        with torch.autocast(x.device.type, enabled=False):       # the GEMMs say their types
            return FusedLSTMLayer._forward(ctx, x, w_in, w_rec, b, wp, c0, h0, idx, steps,
                                           cell_clip, proj_clip, _Gemms(lowp))

    @staticmethod
    def _forward(ctx, x, w_in, w_rec, b, wp, c0, h0, idx, steps, cell_clip, proj_clip, gm):
        dim = w_rec.shape[-1] // 4
        rows = c0.shape[1]
        forget = torch.zeros(4 * dim, dtype=b.dtype, device=b.device)
        forget[2 * dim:3 * dim] = 1.0

        chunk = _chunk_steps(rows, steps)

        def run(d: int):
            bias = b[d] + forget
            n = steps * rows
            gates = w_rec.new_empty(n, 4 * dim)
            w_i = gm.w(w_in[d])
            if idx is not None:
                xp = gm.addmm(bias, x, w_i)                            # (U, 4D), once per type
                torch.index_select(xp, 0, idx[d], out=gates)
                del xp
            c_pre = gates.new_empty(n, dim) if cell_clip is not None else None
            c_all = gates.new_empty(n, dim)
            tc = gates.new_empty(n, dim)
            # m feeds only the projection's GEMMs (forward, and W_p's gradient): kept in their
            # operand type, rounded once (without a projection it is the output: float32)
            m = gates.new_empty(n, dim, dtype=gm.lowp if (gm.lowp and wp is not None) else None)
            p = wp.shape[-1] if wp is not None else dim
            h_pre = gates.new_empty(n, p) if (wp is not None and proj_clip is not None) else None
            h_all = gates.new_empty(n, p) if wp is not None else m
            c, h = c0[d], h0[d]
            w_r = gm.w(w_rec[d])
            w_p = gm.w(wp[d]) if wp is not None else None
            h_zero = not bool(h.any())
            for t in range(steps):
                sl = slice(t * rows, (t + 1) * rows)
                if idx is None and t % chunk == 0:   # the input projection, a few steps ahead
                    ahead = slice(t * rows, min(steps, t + chunk) * rows)
                    gm.addmm(bias, x[d][ahead], w_i, out=gates[ahead])
                z = gates[sl]
                if h_zero:
                    h_zero = False
                else:
                    gm.addmm_(z, h, w_r)
                z[:, :dim].sigmoid_()
                _tanh_(z[:, dim:2 * dim])
                z[:, 2 * dim:].sigmoid_()
                raw = c_pre[sl] if c_pre is not None else c_all[sl]
                torch.mul(z[:, 2 * dim:3 * dim], c, out=raw)
                raw.addcmul_(z[:, :dim], z[:, dim:2 * dim])             # σ(f)c + σ(i)tanh(j)
                c = _clip(raw, cell_clip, c_all[sl])
                torch.mul(c, 2, out=tc[sl]).sigmoid_().mul_(2).sub_(1)   # tanh(c)
                torch.mul(z[:, 3 * dim:], tc[sl], out=m[sl])
                if w_p is not None:
                    hr = h_pre[sl] if h_pre is not None else h_all[sl]
                    gm.mm(m[sl], w_p, out=hr)
                    h = _clip(hr, proj_clip, h_all[sl])
                else:
                    h = m[sl]
            return _Saved(gates, c_pre, c_all, tc, m, h_pre, h_all), c, h

        (s0, cf, hf), (s1, cb, hb) = both_directions(run, x.device)
        ctx.saved_dirs = (s0, s1)
        ctx.steps, ctx.cell_clip, ctx.proj_clip = steps, cell_clip, proj_clip
        ctx.gemms = gm
        ctx.save_for_backward(x, w_in, w_rec, wp if wp is not None else w_rec.new_empty(0),
                              c0, h0, idx if idx is not None else c0.new_empty(0, dtype=torch.long))
        ctx.has_proj, ctx.shared = wp is not None, idx is not None
        out = torch.stack([s0.h, s1.h])
        c_fin, h_fin = torch.stack([cf, cb]), torch.stack([hf, hb])
        ctx.mark_non_differentiable(c_fin, h_fin)
        return out, c_fin, h_fin

    @staticmethod
    def backward(ctx, d_out, _dc, _dh):
        x, w_in, w_rec, wp, c0, h0, idx = ctx.saved_tensors
        wp = wp if ctx.has_proj else None
        idx = idx if ctx.shared else None
        steps, cell_clip, proj_clip = ctx.steps, ctx.cell_clip, ctx.proj_clip
        gm: _Gemms = ctx.gemms
        dim = w_rec.shape[-1] // 4
        rows = c0.shape[1]
        need_x = ctx.needs_input_grad[0]
        chunk = _chunk_steps(rows, steps)

        def run(d: int):
            s: _Saved = ctx.saved_dirs[d]
            g = s.gates
            n = g.shape[0]
            i, j, f, o = g[:, :dim], g[:, dim:2 * dim], g[:, 2 * dim:3 * dim], g[:, 3 * dim:]
            # factors of every step at once: dZ = dc·[j·σ'(i), i·tanh'(j), c_prev·σ'(f)] and
            # dm·tanh(c)·σ'(o); dc receives dm·o·tanh'(c)
            c_prev = torch.cat([c0[d], s.c[:n - rows]])
            f_ijf = g.new_empty(n, 3, dim)
            torch.mul(j, i, out=f_ijf[:, 0]).mul_(1 - i)
            torch.mul(j, j, out=f_ijf[:, 1]).neg_().add_(1).mul_(i)
            torch.mul(c_prev, f, out=f_ijf[:, 2]).mul_(1 - f)
            del c_prev
            o_prime = o * (1 - o)
            f_o = o_prime.mul_(s.tc)
            f_c = torch.mul(s.tc, s.tc).neg_().add_(1).mul_(o)
            h_mask = (s.h_pre.abs() <= proj_clip).to(g.dtype) if s.h_pre is not None else None
            w_rt = gm.w(w_rec[d].t().contiguous())                     # (4D, P)
            w_pt = gm.w(wp[d].t().contiguous()) if wp is not None else None  # (P, D)
            w_it = gm.w(w_in[d].t())                                   # (4D, in)
            d_z = g.new_empty(n, 4 * dim)
            # dZ in the GEMMs' operand type, converted once per step for the step's GEMM and
            # again used by the chunk's weight- and input-gradient GEMMs
            d_z_op = g.new_empty(n, 4 * dim, dtype=gm.lowp) if gm.lowp is not None else d_z
            d_h_all = g.new_empty(n, w_rt.shape[1])
            # the weight gradients are summed over chunks of a few steps, each right after the
            # backward loop has produced it (still in cache): [x | h_prev]ᵀ·dZ for W_in and
            # W_rec together (one GEMM; layer 0's x part goes per type), mᵀ·dH for W_p
            h_prev = torch.cat([h0[d], s.h[:n - rows]])
            lhs = h_prev if idx is not None else torch.cat([x[d], h_prev], 1)   # (N, [in +] P)
            del h_prev
            d_w = g.new_zeros(lhs.shape[1], 4 * dim)
            d_wp = g.new_zeros(dim, w_rt.shape[1]) if wp is not None else None
            d_x = g.new_empty(n, w_in.shape[1]) if (idx is None and need_x) else None
            per_type = g.new_zeros(x.shape[0], 4 * dim) if idx is not None else None
            dh_next = None
            dc_next = None
            c_keep = (s.c_pre.abs() <= cell_clip).to(g.dtype) if cell_clip is not None else None
            for t in reversed(range(steps)):
                sl = slice(t * rows, (t + 1) * rows)
                dh = d_h_all[sl]
                if d_out is None:
                    dh.zero_() if dh_next is None else dh.copy_(dh_next)
                elif dh_next is None:
                    dh.copy_(d_out[d, sl])
                else:
                    torch.add(d_out[d, sl], dh_next, out=dh)
                if h_mask is not None:
                    dh.mul_(h_mask[sl])
                dm = gm.mm(dh, w_pt) if w_pt is not None else dh
                # dc = (dc_next + dm·o·tanh'(c))·keep, keep = the cell clip's mask
                dc = dm * f_c[sl]
                if dc_next is not None:
                    dc.add_(dc_next)
                if c_keep is not None:
                    dc.mul_(c_keep[sl])
                dz = d_z[sl]
                torch.mul(dm, f_o[sl], out=dz[:, 3 * dim:])
                torch.mul(dc.unsqueeze(1), f_ijf[sl], out=dz[:, :3 * dim].view(rows, 3, dim))
                dc_next = dc.mul_(f[sl])
                dz_op = d_z_op[sl].copy_(dz) if d_z_op is not d_z else dz
                if t > 0:
                    dh_next = gm.mm(dz_op, w_rt)
                if t % chunk == 0:
                    done = slice(t * rows, min(steps, t + chunk) * rows)
                    gm.addmm_(d_w, lhs[done].t(), d_z_op[done])
                    if d_wp is not None:
                        gm.addmm_(d_wp, s.m[done].t(), d_h_all[done])
                    if d_x is not None:
                        gm.mm(d_z_op[done], w_it, out=d_x[done])
                    if per_type is not None:
                        per_type.index_add_(0, idx[d, done], d_z[done])
            if idx is None:
                d_win, d_wrec = d_w[:w_in.shape[1]], d_w[w_in.shape[1]:]
                d_b = d_z.sum(0)
            else:
                d_wrec = d_w
                assert per_type is not None                  # kept per type when idx is given
                d_b = per_type.sum(0)
                d_win = gm.mm(x.t(), per_type)
                d_x = gm.mm(per_type, w_it) if need_x else None
            return d_x, d_win, d_wrec, d_b, d_wp

        (x0, win0, wr0, b0, p0), (x1, win1, wr1, b1, p1) = both_directions(run, x.device)
        if not need_x:
            d_x = None
        elif idx is None:
            d_x = torch.stack([x0, x1])
        else:
            d_x = x0.add_(x1)
        d_wp = torch.stack([p0, p1]) if wp is not None else None
        return (d_x, torch.stack([win0, win1]), torch.stack([wr0, wr1]), torch.stack([b0, b1]),
                d_wp, None, None, None, None, None, None, None)


def fused_lstm_stack(lstm, tok: Tensor, idx: Tensor, steps: int, state
                     ) -> Tuple[List[Tensor], List[Tuple[Tensor, Tensor]]]:
    """Every layer of ``lstm`` (an :class:`elmo_engine.model.bilm.LSTMStack`) over a training
    window.

    tok : (U, P) token vectors of the window's distinct types and idx : (2, T·B) the type of
        each position per direction, time-major; or tok (2, T·B, P) per position and idx None
    state : carried (c, h) per layer, (2, B, D) and (2, B, P)

    Returns per layer the outputs (2, T·B, out) (skip connections added) and the final state.
    """
    opts = lstm.opts
    lowp = autocast_dtype(tok.device)        # bf16 GEMMs under the trainer's torch.autocast
    tok = tok.float()                        # (the token layer's output may be bf16 there)
    outs: List[Tensor] = []
    new_state = []
    inp = tok
    index: Optional[Tensor] = idx
    for layer in range(opts.n_layers):
        c0, h0 = state[layer]
        wp = lstm.wp[layer] if opts.has_lstm_projection else None
        out, c, h = FusedLSTMLayer.apply(inp, lstm.w_in[layer], lstm.w_rec[layer], lstm.b[layer],
                                         wp, c0, h0, index, steps, opts.cell_clip, opts.proj_clip,
                                         lowp)
        if opts.use_skip_connections and layer > 0:
            out = out + inp
        outs.append(out)
        new_state.append((c, h))
        inp, index = out, None
    return outs, new_state
