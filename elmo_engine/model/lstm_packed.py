"""The biLSTM's inference path: sequences packed time-major, each direction on its own.

Step t holds its n_t running rows (rows sorted by length), so no GEMM touches padding, and every
step works in preallocated buffers. Layer 0's input projection is computed once per distinct
token vector (:func:`distinct_rows`) and gathered step by step; every other layer's input
projection is one GEMM over all steps. A zero initial state skips ``h @ W_rec`` at the first
step. The GEMMs themselves go through the model's :class:`~elmo_engine.model.cpu_fast.FastKernels`
(pre-packed weights on the CPU, plain GEMMs elsewhere). Exact up to float rounding against the
autograd path (:meth:`LSTMStack.forward` with grad on); see tests/engine/test_bilm_fast_paths.py.

In bf16 (or fp16) the GEMMs take and give the weights' type, but the cell state and the gate
arithmetic are float32: each step's gate pre-activations are converted once, and the cell's
output is rounded once, for the projection. Computed in bf16, ``tanh`` as ``2·σ(2x) − 1``
cancels: σ near ½ carries 8 significant bits, so ``tanh`` of a small value kept an absolute
error of ~2⁻⁹ and a relative error of up to tens of percent. On the full-size model (random
weights, 256 held-out sentences) layer 2's cosine to float32 at the 0.1 % quantile was 0.99897;
with float32 gates it is 0.99998 (``benchmarks/bench_embed_command.py``), at the same speed: the
float32 gate passes are faster than bf16's, which convert every element in and out.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

from elmo_engine.model.cpu_fast import both_directions

if TYPE_CHECKING:
    from elmo_engine.model.lstm import LSTMState, LSTMStack


def cell_dtype(dtype: torch.dtype) -> torch.dtype:
    """The LSTM cell state's type for weights of ``dtype``: float32 under bf16 and fp16 (the
    cell and the gate arithmetic stay float32; see the module docstring), else ``dtype``."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def distinct_rows(rows: Tensor) -> Tuple[Tensor, Tensor]:
    """``torch.unique(rows, dim=0, return_inverse=True)`` up to the order of the distinct rows,
    in a fraction of its time: rows are grouped by an integer hash of their bits (one 1-D
    unique instead of a lexicographic sort of whole rows), and the grouping is checked exactly,
    falling back to ``torch.unique`` should two different rows ever share a hash."""
    if rows.shape[0] == 0 or rows.dtype not in (torch.float32, torch.int32, torch.bfloat16):
        return torch.unique(rows, dim=0, return_inverse=True)
    gen = torch.Generator(device="cpu").manual_seed(0x5eed)
    coeff = torch.randint(1, 2 ** 31 - 1, (rows.shape[1],), generator=gen,
                          dtype=torch.int32).to(rows.device) | 1
    bits = rows.contiguous().view(torch.int16 if rows.dtype == torch.bfloat16 else torch.int32)
    keys = (bits.to(torch.int32) * coeff).sum(1)                    # int32 products, int64 sum
    _, inverse = torch.unique(keys, return_inverse=True)
    first = torch.empty(int(inverse.max()) + 1, dtype=torch.long, device=rows.device)
    first.scatter_(0, inverse, torch.arange(rows.shape[0], device=rows.device))
    distinct = rows[first]
    if not torch.equal(distinct[inverse], rows):
        return torch.unique(rows, dim=0, return_inverse=True)
    return distinct, inverse


def run_packed(stack: "LSTMStack", x: Tensor, n_active: Sequence[int], state: "LSTMState"
               ) -> Tuple[List[Tensor], "LSTMState", Tensor]:
    """Inference over sequences packed time-major: step t holds its n_t running rows, so no
    GEMM touches padding, and every step works in preallocated buffers (the packed
    recurrent GEMM alone returns a new tensor, the step's input projection added). The
    forward and backward LMs share nothing but their input, so each runs its whole stack on
    its own (on the CPU, in two threads; see :func:`both_directions`).

    Same arguments as :meth:`LSTMStack.forward`. Returns per layer the (2, total, out)
    packed outputs, the final state, and ``pos``: packed row k is time-major index
    ``pos[k] = t·B + r``.
    """
    _, bsz, steps, _ = x.shape
    offsets = [0]
    for n in n_active:
        offsets.append(offsets[-1] + n)
    total = offsets[-1]
    pos = torch.cat([torch.arange(n, device=x.device) + t * bsz
                     for t, n in enumerate(n_active) if n]) if total else \
        torch.zeros(0, dtype=torch.long, device=x.device)
    layer_in = x.transpose(1, 2).reshape(2, steps * bsz, -1)[:, pos]  # (2, total, P)
    # Layer 0's input is the token layer, a function of the word type: its input projection
    # is computed once per distinct row (both directions read the same rows, reordered).
    distinct: Optional[Tensor]
    inverse: Optional[Tensor]
    distinct, inverse = distinct_rows(layer_in.reshape(2 * total, -1))
    if distinct.shape[0] > 0.9 * total:
        distinct = inverse = None
    else:
        inverse = inverse.view(2, total)

    def run(direction: int):
        return _direction(stack, direction, layer_in[direction], distinct,
                          None if inverse is None else inverse[direction],
                          offsets, n_active, state)

    (fwd_out, fwd_state), (bwd_out, bwd_state) = both_directions(
        run, x.device, parallel=bsz >= stack.kernels.config.parallel_min_rows)
    packed = [torch.stack(pair) for pair in zip(fwd_out, bwd_out)]   # per layer (2, total, out)
    new_state: "LSTMState" = [(torch.stack([fc, bc]), torch.stack([fh, bh]))
                              for (fc, fh), (bc, bh) in zip(fwd_state, bwd_state)]
    return packed, new_state, pos


def gates(z: Tensor, c: Tensor, cell_clip: Optional[float], m_buf: Tensor,
          z32: Optional[Tensor] = None, m_low: Optional[Tensor] = None) -> Tensor:
    """One step's gate arithmetic, in place: the cell ``c`` (n, D) becomes
    ``clip(σ(f)·c + σ(i)·tanh(j))`` and the cell's output ``tanh(c)·σ(o)`` (n, D) is returned,
    from the pre-activations ``z`` (n, 4D), blocks i j f o, which it overwrites.

    ``m_buf`` (n, D, the cell's type) holds the output; under bf16 or fp16 weights ``z32``
    (n, 4D, float32) takes the converted pre-activations and ``m_low`` (n, D, the weights' type)
    the output, rounded once for the projection. Each buffer is the caller's, reused step after
    step. Measured in ``benchmarks/bench_gate_step.py`` against the step's GEMMs."""
    dim = c.shape[1]
    if z32 is not None:
        z = z32.copy_(z)
    # tanh(x) as 2·σ(2x) − 1: torch's CPU sigmoid is ~4x faster than its tanh (85
    # against 330 µs on 32×4096 floats, one core of an AVX-512 EPYC); they agree to
    # ~1e-7 in float32. All four gate blocks then take one sigmoid pass.
    tj = z[:, dim:2 * dim].mul_(2)
    z.sigmoid_()                                                    # σ(i) σ(2j) σ(f) σ(o)
    tj.mul_(2).sub_(1)                                              # tanh(j)
    c.mul_(z[:, 2 * dim:3 * dim]).addcmul_(z[:, :dim], tj)          # σ(f)c + σ(i)tanh(j)
    if cell_clip is not None:
        c.clamp_(-cell_clip, cell_clip)
    m = torch.mul(c, 2, out=m_buf)
    m.sigmoid_().mul_(2).sub_(1)                                    # tanh(c)
    if m_low is not None:                                           # tanh(c)·σ(o)
        return torch.mul(m, z[:, 3 * dim:], out=m_low)
    return m.mul_(z[:, 3 * dim:])


def _direction(stack: "LSTMStack", d: int, inp: Tensor, distinct: Optional[Tensor],
               inverse: Optional[Tensor], offsets: Sequence[int], n_active: Sequence[int],
               state: "LSTMState") -> Tuple[List[Tensor], List[Tuple[Tensor, Tensor]]]:
    """Every layer of direction ``d`` (0 forward, 1 backward) over packed rows ``inp``
    (total, P). Returns the per-layer outputs (total, out) and final (c, h) of each layer."""
    opts = stack.opts
    kernels = stack.kernels
    dim = opts.lstm_dim
    total = inp.shape[0]
    outs: List[Tensor] = []
    states: List[Tuple[Tensor, Tensor]] = []
    for layer in range(opts.n_layers):
        w_rec = stack.w_rec[layer][d]
        wp = stack.wp[layer] if opts.has_lstm_projection else None             # (2, D, P)
        bias = stack.b[layer][d] + stack.forget_bias[0]
        h = state[layer][1][d].clone()
        # the cell state and the gate arithmetic are float32 whatever the weights' type (see
        # the module docstring): in bf16 or fp16 each step's gates are converted once
        c = state[layer][0][d].to(cell_dtype(h.dtype), copy=True)
        low = c.dtype != h.dtype
        rows = h.shape[0]
        rec_packed = kernels.recurrent_weight(layer, d, stack.w_rec[layer], rows)
        if layer == 0 and distinct is not None:
            # one row per distinct token vector, gathered step by step into a small buffer
            # (a large projection goes to the scratch buffer, which layers 1+ use only
            # after this layer is done)
            source = kernels.input_projection(layer, d, stack.w_in[layer], distinct, bias)
            z_buf = source.new_empty(rows, 4 * dim)
            xp = None
        else:
            # every step in one GEMM
            xp = kernels.input_projection(layer, d, stack.w_in[layer], inp, bias)
        out = h.new_empty(total, h.shape[-1])
        m_buf = c.new_empty(rows * dim)                             # float32
        z32_buf = c.new_empty(rows, 4 * dim) if low else None      # the gates in float32
        m_low = h.new_empty(rows * dim) if low else None           # the projection's input
        h_zero = not bool(h.any())          # a fresh state: the first step has no h @ W_rec
        for t, n in enumerate(n_active):
            if n == 0:
                continue
            if xp is None:
                assert inverse is not None          # xp is None only for the distinct rows
                z = torch.index_select(source, 0, inverse[offsets[t]:offsets[t + 1]],
                                       out=z_buf[:n])
            else:
                z = xp[offsets[t]:offsets[t + 1]]                 # (n, 4D): i j f o
            if h_zero:
                h_zero = False
            else:
                z = kernels.add_recurrent(z, h[:n], w_rec, rec_packed)
            m = gates(z, c[:n], opts.cell_clip, m_buf[:n * dim].view(n, dim),
                      None if z32_buf is None else z32_buf[:n],
                      None if m_low is None else m_low[:n * dim].view(n, dim))
            h_t = out[offsets[t]:offsets[t + 1]]                  # (n, out)
            if wp is not None:
                kernels.project(layer, d, wp, m, h_t)
                if opts.proj_clip is not None:
                    h_t.clamp_(-opts.proj_clip, opts.proj_clip)
            else:
                h_t.copy_(m)
            h[:n] = h_t
        if opts.use_skip_connections and layer > 0:
            out += inp
        outs.append(out)
        states.append((c, h))
        inp = out
    kernels.release_large_scratch()
    return outs, states
