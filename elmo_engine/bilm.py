"""The ELMo biLM in PyTorch: char-CNN → highway → projection → L×(forward, backward) LSTM.

Follows ``docs/elmo-checkpoint-format.md`` §6–§9 exactly. Parameters are stored in the published
layout (TensorFlow conventions: ``x @ W``, LSTM gate blocks ordered i, j, f, o, forget bias +1 added
at run time), so loading and exporting are plain copies. The same module is used for inference
(``torch.no_grad``) and for training (:mod:`elmo_engine.lm_train`): every operation is
autograd-safe.

Speed (see ``benchmarks/bench_bilm.py``), all exact up to float rounding:

- token layer: once per distinct word type; the convolutions pool only the windows that touch the
  word plus one window of pure padding (all such windows are equal), as one GEMM per chunk of
  words of similar length;
- LSTM inputs: layer 0's input projection once per distinct token vector, every other layer's for
  all steps in one GEMM; no ``h @ W_rec`` at the first step from a zero state;
- rows sorted by length and packed time-major, so no GEMM touches padding; each step works in
  preallocated buffers, but for the output of the packed recurrent GEMM;
- the forward and backward LMs share nothing but their input: on the CPU they run side by side
  in two threads for batches of ``PARALLEL_MIN_ROWS`` rows or more, one after the other with
  every core for a single sentence (bound by streaming the weights);
- on the CPU, GEMMs of a few rows (every step's recurrent GEMM, the input projections of
  short inputs) use weights pre-packed once into oneDNN's GEMM layout, instead of re-packing
  them at every call;
- when the caller drops the ``<S>``/``</S>`` positions, the forward step at ``</S>`` and the
  backward step at ``<S>`` are skipped (nothing else depends on them).
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Callable, List, Optional, Sequence, Tuple, TypeVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from elmo_engine.options import BiLMOptions

# (c, h) per layer; each of shape (2 directions, B, D) and (2, B, P)
LSTMState = List[Tuple[Tensor, Tensor]]

T_ = TypeVar("T_")
# From this many rows on, the directions run side by side, a core each; a single row runs them
# one after the other with every core, so that only one layer's weights (40 MB in the full model)
# are streamed at a time. With packed weights (PACKED_WEIGHTS), side by side won from 2 rows on a
# shared 2-core Xeon (benchmarks/bench_bilm.py --crossover: 202 against 214 ms at 2 rows, 831
# against 917 ms at 64); without them the crossover had fallen between 8 and 64 rows.
PARALLEL_MIN_ROWS = 2
# On the CPU, GEMMs of a few rows by the LSTM weights use copies of the weights pre-packed into
# oneDNN's blocked layout (see LSTMStack._packed): the recurrent GEMM of every step that has at
# least PACKED_MIN_ROWS running rows (one row is a matrix-vector product, which packing does not
# speed up), and input projections of at most PACKED_INPUT_MAX_ROWS rows (larger GEMMs amortise
# the packing themselves). False: plain GEMMs only.
PACKED_WEIGHTS = True
PACKED_MIN_ROWS = 2
PACKED_INPUT_MAX_ROWS = 128
_pool: Optional[Tuple[int, ThreadPoolExecutor]] = None      # (owning process, pool)
_pool_lock = threading.Lock()
_onednn_ok: Optional[bool] = None


def onednn_packing() -> bool:
    """Whether this torch build can pre-pack weights for oneDNN's GEMM (CPU builds with
    oneDNN/mkldnn), checked once on small matrices against plain products."""
    global _onednn_ok
    if _onednn_ok is None:
        try:
            w = torch.arange(48, dtype=torch.float32).view(6, 8) / 7       # (in, out)
            a = torch.arange(18, dtype=torch.float32).view(3, 6) / 5
            other = torch.ones(3, 8)
            packed = torch.ops.mkldnn._reorder_linear_weight(w.t().contiguous(), 3)
            plain = torch.ops.mkldnn._linear_pointwise(a, packed, other[0], "none", [], "")
            summed = torch.ops.mkldnn._linear_pointwise.binary(a, other, packed, None, "add")
            _onednn_ok = (bool(torch.backends.mkldnn.is_available())
                          and torch.allclose(plain, a @ w + 1) and torch.allclose(summed, a @ w + 1))
        except (AttributeError, RuntimeError, NotImplementedError):
            _onednn_ok = False
    return _onednn_ok


def distinct_rows(rows: Tensor) -> Tuple[Tensor, Tensor]:
    """``torch.unique(rows, dim=0, return_inverse=True)`` up to the order of the distinct rows,
    in a fraction of its time: rows are grouped by an integer hash of their bits (one 1-D
    unique instead of a lexicographic sort of whole rows), and the grouping is checked exactly,
    falling back to ``torch.unique`` should two different rows ever share a hash."""
    if rows.shape[0] == 0 or rows.dtype not in (torch.float32, torch.int32):
        return torch.unique(rows, dim=0, return_inverse=True)
    gen = torch.Generator(device="cpu").manual_seed(0x5eed)
    coeff = torch.randint(1, 2 ** 31 - 1, (rows.shape[1],), generator=gen,
                          dtype=torch.int32).to(rows.device) | 1
    keys = (rows.contiguous().view(torch.int32) * coeff).sum(1)     # int32 products, int64 sum
    _, inverse = torch.unique(keys, return_inverse=True)
    first = torch.empty(int(inverse.max()) + 1, dtype=torch.long, device=rows.device)
    first.scatter_(0, inverse, torch.arange(rows.shape[0], device=rows.device))
    distinct = rows[first]
    if not torch.equal(distinct[inverse], rows):
        return torch.unique(rows, dim=0, return_inverse=True)
    return distinct, inverse


def both_directions(fn: Callable[[int], T_], device: torch.device, parallel: bool = True
                    ) -> List[T_]:
    """``[fn(0), fn(1)]``: on the CPU, run concurrently in two threads, each with half of the
    caller's intra-op threads.

    The two directions are independent sequential recurrences; two of them side by side with
    a core each beat one after the other with both cores on every small per-step GEMM
    (measured with ``benchmarks/bench_bilm.py``). The workers keep their own grad/inference
    mode from the caller. ``torch.set_num_threads`` also sets the default that threads created
    later start from: the caller puts its own count back as soon as both workers have set
    theirs, before either starts ``fn``.
    """
    threads = torch.get_num_threads()
    if device.type != "cpu" or threads < 2 or not parallel:
        return [fn(0), fn(1)]
    global _pool
    with _pool_lock:
        if _pool is None or _pool[0] != os.getpid():   # a forked child has no pool threads
            _pool = (os.getpid(), ThreadPoolExecutor(2, thread_name_prefix="bilm-direction"))
        pool = _pool[1]
    inference = torch.is_inference_mode_enabled()
    grad = torch.is_grad_enabled()
    per_worker = max(1, threads // 2)
    configured = [threading.Event(), threading.Event()]
    restored = threading.Event()

    def task(direction: int) -> T_:
        try:
            if torch.get_num_threads() != per_worker:  # (the get initialises this thread's
                torch.set_num_threads(per_worker)      # own setting, so the set sticks)
        finally:
            configured[direction].set()
        restored.wait()
        with torch.inference_mode(inference), torch.set_grad_enabled(grad):
            return fn(direction)

    futures = [pool.submit(task, d) for d in (0, 1)]
    try:
        for event in configured:
            event.wait()
        torch.set_num_threads(threads)
    finally:
        restored.set()
    wait(futures)
    return [f.result() for f in futures]


class CharCNN(nn.Module):
    """Token layer: character embeddings, convolutions + max-pool, highway, projection (§6)."""

    def __init__(self, opts: BiLMOptions):
        super().__init__()
        self.opts = opts
        c, n = opts.char_embed_dim, opts.n_filters
        # 261 stored rows; row 0 of the (262, C) lookup table is the zero padding row.
        self.char_embed = nn.Parameter(torch.zeros(261, c))
        self.conv_w = nn.ParameterList(
            [nn.Parameter(torch.zeros(1, w, c, k)) for w, k in opts.filters])
        self.conv_b = nn.ParameterList([nn.Parameter(torch.zeros(k)) for _, k in opts.filters])
        self.w_carry = nn.ParameterList([nn.Parameter(torch.zeros(n, n))
                                         for _ in range(opts.n_highway)])
        self.b_carry = nn.ParameterList([nn.Parameter(torch.zeros(n))
                                         for _ in range(opts.n_highway)])
        self.w_transform = nn.ParameterList([nn.Parameter(torch.zeros(n, n))
                                             for _ in range(opts.n_highway)])
        self.b_transform = nn.ParameterList([nn.Parameter(torch.zeros(n))
                                             for _ in range(opts.n_highway)])
        if opts.has_token_projection:
            self.w_proj = nn.Parameter(torch.zeros(n, opts.projection_dim))
            self.b_proj = nn.Parameter(torch.zeros(opts.projection_dim))
        else:
            self.w_proj = None
            self.b_proj = None

    def forward(self, char_ids: Tensor) -> Tensor:
        """``char_ids`` (n, M) int64 → token vectors (n, P)."""
        table = torch.cat([self.char_embed.new_zeros(1, self.char_embed.shape[1]),
                           self.char_embed], 0)                       # (262, C)
        n, m = char_ids.shape
        # A window that holds only a row's trailing padding gives the same value wherever it
        # sits, so the max over positions needs the windows that touch the word plus one of
        # those: the first `used + widest` characters of a row whose last non-padding character
        # is at `used - 1`. Rows are sorted by that length and pooled in chunks, each cut to its
        # longest row (a typical word needs ~20 of the 50 positions).
        positions = torch.arange(1, m + 1, device=char_ids.device)
        used = ((char_ids != char_ids[:, -1:]) * positions).amax(1) if n else positions[:0]
        order = torch.argsort(used)
        lengths = used[order].tolist()
        widest = max(w for w, _ in self.opts.filters)
        kernel = self._kernel(widest)                                 # (widest·C, N)
        bias = torch.cat(list(self.conv_b))
        parts = []
        for start in range(0, n, self.CHUNK):
            rows = order[start:start + self.CHUNK]
            span = min(m, lengths[min(start + self.CHUNK, n) - 1] + widest)
            parts.append(self._pool(F.embedding(char_ids[rows, :span], table), kernel, span))
        pooled = torch.cat(parts) if parts else table.new_zeros(0, kernel.shape[1])
        pooled = pooled[torch.argsort(order)] + bias
        x = torch.relu(pooled) if self.opts.activation == "relu" else torch.tanh(pooled)
        for wc, bc, wt, bt in zip(self.w_carry, self.b_carry, self.w_transform, self.b_transform):
            g = torch.sigmoid(torch.addmm(bc, x, wc))
            t = torch.relu(torch.addmm(bt, x, wt))
            x = g * t + (1.0 - g) * x
        if self.w_proj is not None:
            x = torch.addmm(self.b_proj, x, self.w_proj)              # (n, P)
        return x

    CHUNK = 128   # rows pooled at once: their conv outputs stay in the last-level cache

    def _kernel(self, widest: int) -> Tensor:
        """Every filter bank as one (widest·C, N) matrix, narrower kernels padded with zeros:
        the convolutions become one GEMM over windows of ``widest`` characters."""
        c = self.opts.char_embed_dim
        blocks = []
        for w in self.conv_w:                                         # file layout (1, w, C, k)
            width, k = w.shape[1], w.shape[3]
            block = w[0].reshape(width * c, k)                        # row index = i·C + channel
            blocks.append(F.pad(block, (0, 0, 0, (widest - width) * c)))
        return torch.cat(blocks, 1)

    def _pool(self, emb: Tensor, kernel: Tensor, span: int) -> Tensor:
        """Max over positions of every filter (cross-correlation, no flip), before the bias.

        ``emb`` (r, span, C): the first ``span`` characters of r rows. A filter of width w has
        ``span - w + 1`` valid positions; the windows past them read zero padding and are left
        out of its max."""
        r, _, c = emb.shape
        widest = kernel.shape[0] // c
        padded = F.pad(emb, (0, 0, 0, widest - 1))                    # (r, span+widest-1, C)
        windows = padded.unfold(1, widest, 1).transpose(2, 3)         # (r, span, widest, C)
        y = (windows.reshape(r * span, widest * c) @ kernel).view(r, span, -1)
        pooled = []
        col = 0
        for width, k in self.opts.filters:
            pooled.append(y[:, :span - width + 1, col:col + k].amax(1))
            col += k
        return torch.cat(pooled, 1)


class LSTMStack(nn.Module):
    """L layers of TensorFlow ``LSTMCell`` with projection, forward and backward (§7)."""

    def __init__(self, opts: BiLMOptions):
        super().__init__()
        self.opts = opts
        d, p, out = opts.lstm_dim, opts.projection_dim, opts.output_dim
        # per layer, forward (RNN_0) and backward (RNN_1) stacked on axis 0. The file's W_0 is
        # [w_in; w_rec] along its rows: see :meth:`file_tensor`.
        self.w_in = nn.ParameterList()
        self.w_rec = nn.ParameterList()
        self.b = nn.ParameterList()
        self.wp = nn.ParameterList()
        for layer in range(opts.n_layers):
            in_dim = p if layer == 0 else out
            self.w_in.append(nn.Parameter(torch.zeros(2, in_dim, 4 * d)))
            self.w_rec.append(nn.Parameter(torch.zeros(2, out, 4 * d)))
            self.b.append(nn.Parameter(torch.zeros(2, 4 * d)))
            if opts.has_lstm_projection:
                self.wp.append(nn.Parameter(torch.zeros(2, d, p)))
        forget = torch.zeros(1, 4 * d)
        forget[:, 2 * d:3 * d] = 1.0                                  # TF's forget_bias=1.0
        self.register_buffer("forget_bias", forget, persistent=False)

    def zero_state(self, batch: int, device=None, dtype=None) -> LSTMState:
        d, out = self.opts.lstm_dim, self.opts.output_dim
        ref = self.w_in[0]
        device = device or ref.device
        dtype = dtype or ref.dtype
        return [(torch.zeros(2, batch, d, device=device, dtype=dtype),
                 torch.zeros(2, batch, out, device=device, dtype=dtype))
                for _ in range(self.opts.n_layers)]

    def forward(self, x: Tensor, n_active: Sequence[int], state: LSTMState
                ) -> Tuple[List[Tensor], LSTMState]:
        """Run all layers.

        Parameters
        ----------
        x : (2, B, T, P) token vectors; [0] in forward order, [1] each row reversed in place over
            its valid length (so both directions read their sequence from index 0).
        n_active : for each step t, how many rows (a prefix, rows sorted by length descending)
            are still running. Rows stop updating their state once past their length.
        state : initial (c, h) per layer.

        Returns
        -------
        outputs : per layer (2, B, T, out), zero where a row has ended
        state : the state of each row after its last valid step
        """
        if not torch.is_grad_enabled():
            return self._forward_packed(x, n_active, state)
        opts = self.opts
        _, bsz, steps, _ = x.shape
        outputs: List[Tensor] = []
        new_state: LSTMState = []
        layer_in = x.transpose(1, 2)                                  # (2, T, B, P) time-major
        for layer in range(opts.n_layers):
            bias = (self.b[layer] + self.forget_bias).unsqueeze(1)    # (2, 1, 4D)
            # input projection of every step in one GEMM: (2, T*B, in) @ (2, in, 4D)
            flat = layer_in.reshape(2, steps * bsz, -1)
            xp = torch.baddbmm(bias, flat, self.w_in[layer]).reshape(2, steps, bsz, -1)
            out, c, h = self._run_autograd(layer, xp, n_active, state[layer])  # (2, T, B, out)
            if opts.use_skip_connections and layer > 0:
                out = out + layer_in
            outputs.append(out.transpose(1, 2))                       # (2, B, T, out)
            new_state.append((c, h))
            layer_in = out
        return outputs, new_state

    def _forward_packed(self, x: Tensor, n_active: Sequence[int], state: LSTMState
                        ) -> Tuple[List[Tensor], LSTMState]:
        """Inference path: :meth:`run_packed`, its outputs put back in the (2, B, T, out) layout."""
        _, bsz, steps, _ = x.shape
        packed, new_state, pos = self.run_packed(x, n_active, state)
        outputs: List[Tensor] = []
        for out in packed:
            padded = out.new_zeros(2, steps * bsz, out.shape[-1])
            padded[:, pos] = out
            outputs.append(padded.view(2, steps, bsz, -1).transpose(1, 2))  # (2, B, T, out)
        return outputs, new_state

    def run_packed(self, x: Tensor, n_active: Sequence[int], state: LSTMState
                   ) -> Tuple[List[Tensor], LSTMState, Tensor]:
        """Inference over sequences packed time-major: step t holds its n_t running rows, so no
        GEMM touches padding, and every step works in preallocated buffers (the packed
        recurrent GEMM alone returns a new tensor, the step's input projection added). The
        forward and backward LMs share nothing but their input, so each runs its whole stack on
        its own (on the CPU, in two threads; see :func:`both_directions`).

        Same arguments as :meth:`forward`. Returns per layer the (2, total, out) packed outputs,
        the final state, and ``pos``: packed row k is time-major index ``pos[k] = t·B + r``.
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
        distinct, inverse = distinct_rows(layer_in.reshape(2 * total, -1))
        if distinct.shape[0] > 0.9 * total:
            distinct = inverse = None
        else:
            inverse = inverse.view(2, total)

        def run(direction: int):
            return self._direction(direction, layer_in[direction], distinct,
                                   None if inverse is None else inverse[direction],
                                   offsets, n_active, state)

        (fwd_out, fwd_state), (bwd_out, bwd_state) = both_directions(
            run, x.device, parallel=bsz >= PARALLEL_MIN_ROWS)
        packed = [torch.stack(pair) for pair in zip(fwd_out, bwd_out)]   # per layer (2, total, out)
        new_state: LSTMState = [(torch.stack([fc, bc]), torch.stack([fh, bh]))
                                for (fc, fh), (bc, bh) in zip(fwd_state, bwd_state)]
        return packed, new_state, pos

    def _direction(self, d: int, inp: Tensor, distinct: Optional[Tensor],
                   inverse: Optional[Tensor], offsets: Sequence[int], n_active: Sequence[int],
                   state: LSTMState) -> Tuple[List[Tensor], List[Tuple[Tensor, Tensor]]]:
        """Every layer of direction ``d`` (0 forward, 1 backward) over packed rows ``inp``
        (total, P). Returns the per-layer outputs (total, out) and final (c, h) of each layer."""
        opts = self.opts
        dim = opts.lstm_dim
        total = inp.shape[0]
        outs: List[Tensor] = []
        states: List[Tuple[Tensor, Tensor]] = []
        for layer in range(opts.n_layers):
            w_rec = self.w_rec[layer][d]
            wp = self.wp[layer][d] if opts.has_lstm_projection else None
            bias = self.b[layer][d] + self.forget_bias[0]
            c = state[layer][0][d].clone()
            h = state[layer][1][d].clone()
            rows = h.shape[0]
            rec_packed = self._packed("w_rec", layer, d) if rows >= PACKED_MIN_ROWS else None
            if layer == 0 and distinct is not None:
                # one row per distinct token vector, gathered step by step into a small buffer
                # (a large projection goes to the scratch buffer, which layers 1+ use only
                # after this layer is done)
                source = self._input_projection(layer, d, distinct, bias)
                z_buf = source.new_empty(rows, 4 * dim)
                xp = None
            else:
                xp = self._input_projection(layer, d, inp, bias)   # every step in one GEMM
            out = c.new_empty(total, h.shape[-1])
            tj_buf = c.new_empty(rows * dim)
            m_buf = c.new_empty(rows * dim)
            h_zero = not bool(h.any())          # a fresh state: the first step has no h @ W_rec
            for t, n in enumerate(n_active):
                if n == 0:
                    continue
                if xp is None:
                    z = torch.index_select(source, 0, inverse[offsets[t]:offsets[t + 1]],
                                           out=z_buf[:n])
                else:
                    z = xp[offsets[t]:offsets[t + 1]]                 # (n, 4D): i j f o
                if h_zero:
                    h_zero = False
                elif rec_packed is not None and n >= PACKED_MIN_ROWS:
                    z = torch.ops.mkldnn._linear_pointwise.binary(h[:n], z, rec_packed, None, "add")
                else:
                    z.addmm_(h[:n], w_rec)
                tj = torch.tanh(z[:, dim:2 * dim], out=tj_buf[:n * dim].view(n, dim))
                z[:, :dim].sigmoid_()
                z[:, 2 * dim:].sigmoid_()
                c_n = c[:n]
                c_n.mul_(z[:, 2 * dim:3 * dim]).addcmul_(z[:, :dim], tj)  # σ(f)c + σ(i)tanh(j)
                if opts.cell_clip is not None:
                    c_n.clamp_(-opts.cell_clip, opts.cell_clip)
                m = torch.tanh(c_n, out=m_buf[:n * dim].view(n, dim)).mul_(z[:, 3 * dim:])
                h_t = out[offsets[t]:offsets[t + 1]]                  # (n, out)
                if wp is not None:
                    torch.mm(m, wp, out=h_t)
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
        bufs = self.__dict__.get("_scratch_bufs", {})
        buf = bufs.get(d)
        if buf is not None and buf.numel() * buf.element_size() > (256 << 20):
            del bufs[d]                              # do not hold on to a huge one-off buffer
        return outs, states

    def _input_projection(self, layer: int, d: int, x: Tensor, bias: Tensor) -> Tensor:
        """``bias + x @ W_in`` of ``layer``, direction ``d``: with the packed weights for a few
        rows, else into the direction's reusable scratch buffer."""
        dim4 = self.w_in[layer].shape[-1]
        if x.shape[0] <= PACKED_INPUT_MAX_ROWS:
            packed = self._packed("w_in", layer, d)
            if packed is not None:
                return torch.ops.mkldnn._linear_pointwise(x.contiguous(), packed, bias, "none",
                                                          [], "")
        out = self._scratch(d, x.shape[0] * dim4, x).view(-1, dim4)
        return torch.addmm(bias, x, self.w_in[layer][d], out=out)

    def _packed(self, name: str, layer: int, d: int) -> Optional[Tensor]:
        """Weight ``name`` (``"w_rec"`` or ``"w_in"``) of ``layer``, direction ``d``, pre-packed
        into oneDNN's blocked GEMM layout; None where that does not apply (``PACKED_WEIGHTS``
        off, not a float32 CPU tensor, a torch build without oneDNN).

        A plain GEMM of a few rows by a 512×16384 weight spends most of its time re-packing the
        weight, at every call: packed once, the recurrent step's GEMM (with the input projection
        added in the same call) ran 1.9-2.9× faster on one core of a Xeon at 2-128 rows, and an
        11-row input projection 2.4× faster (``benchmarks/bench_bilm.py --gemm``). A packed
        copy works for any number of rows. It is kept per weight, layer and direction, and
        packed again (30-50 ms) when the weight changes: a new tensor, or an in-place update that
        bumps its version counter (writes through ``.data`` do not, and need
        :meth:`drop_packed`)."""
        param = getattr(self, name)[layer]
        if not PACKED_WEIGHTS or param.device.type != "cpu" or param.dtype != torch.float32 \
                or not onednn_packing():
            return None
        try:
            version = param._version       # bumped by in-place updates (optimizer, load, copy_)
        except RuntimeError:                # an inference tensor: can change only in that mode
            version = -1
        packs = self.__dict__.setdefault("_packed_weights", {})
        key = (version, param.data_ptr())
        held = packs.get((name, layer, d))
        if held is None or held[0] != key:
            packs.pop((name, layer, d), None)              # free the old copy before packing
            w_t = param.detach()[d].t().contiguous()       # (out, in), the layout oneDNN packs
            held = packs[(name, layer, d)] = (key, torch.ops.mkldnn._reorder_linear_weight(w_t))
        return held[1]

    def __getstate__(self):
        """Copies (``copy.deepcopy``) leave the per-instance caches behind: the packed weights
        are opaque oneDNN tensors that cannot be copied, and both are rebuilt on demand."""
        state = self.__dict__.copy()
        state.pop("_packed_weights", None)
        state.pop("_scratch_bufs", None)
        return state

    def drop_packed(self) -> None:
        """Free the packed copies of the weights (they are rebuilt when next needed)."""
        self.__dict__.pop("_packed_weights", None)

    def _scratch(self, key: int, numel: int, like: Tensor) -> Tensor:
        """A reusable buffer for the input projections: a fresh multi-hundred-MB allocation per
        call costs more in page faults than its GEMM saves (measured on the full model)."""
        bufs = self.__dict__.setdefault("_scratch_bufs", {})
        buf = bufs.get(key)
        if buf is None or buf.numel() < numel or buf.device != like.device or buf.dtype != like.dtype:
            bufs.pop(key, None)
            buf = bufs[key] = like.new_empty(numel)
        return buf[:numel]

    def _run_autograd(self, layer: int, xp: Tensor, n_active: Sequence[int], state):
        """Training: the same computation with out-of-place ops only."""
        opts = self.opts
        w_rec = self.w_rec[layer]
        wp = self.wp[layer] if opts.has_lstm_projection else None
        _, steps, bsz, _ = xp.shape
        c, h = state
        hs: List[Tensor] = []
        for t in range(steps):
            n = n_active[t]
            z = torch.baddbmm(xp[:, t, :n], h[:, :n], w_rec)          # (2, n, 4D)
            i, j, f, o = z.chunk(4, dim=2)
            c_new = torch.sigmoid(f) * c[:, :n] + torch.sigmoid(i) * torch.tanh(j)
            if opts.cell_clip is not None:
                c_new = c_new.clamp(-opts.cell_clip, opts.cell_clip)
            m = torch.sigmoid(o) * torch.tanh(c_new)                  # (2, n, D)
            if wp is not None:
                h_new = torch.bmm(m, wp)                              # (2, n, P)
                if opts.proj_clip is not None:
                    h_new = h_new.clamp(-opts.proj_clip, opts.proj_clip)
            else:
                h_new = m
            if n == bsz:
                c, h = c_new, h_new
            else:
                c = torch.cat([c_new, c[:, n:]], 1)
                h = torch.cat([h_new, h[:, n:]], 1)
            hs.append(h_new if n == bsz else F.pad(h_new, (0, 0, 0, bsz - n)))
        return torch.stack(hs, dim=1), c, h                           # (2, T, B, out)


def reverse_index(lengths: Tensor, steps: int) -> Tensor:
    """(B, T) index that reverses each row's first ``length`` positions and keeps the rest."""
    t = torch.arange(steps, device=lengths.device)[None, :]
    lens = lengths[:, None]
    return torch.where(t < lens, lens - 1 - t, t)


class BiLM(nn.Module):
    """The full biLM. Input: char ids of framed sentences; output: the L+1 layers (§9)."""

    def __init__(self, opts: BiLMOptions):
        super().__init__()
        self.opts = opts
        self.char_cnn = CharCNN(opts)
        self.lstm = LSTMStack(opts)

    @property
    def device(self) -> torch.device:
        return self.lstm.w_in[0].device

    @property
    def dtype(self) -> torch.dtype:
        return self.lstm.w_in[0].dtype

    def token_vectors(self, char_ids: Tensor) -> Tensor:
        """(n, M) ids → (n, P) context-free token vectors."""
        return self.char_cnn(char_ids)

    def contextual(self, tok: Tensor, lengths: Tensor, state: Optional[LSTMState] = None,
                   boundaries: bool = True) -> Tuple[Tensor, Optional[LSTMState]]:
        """Run the biLSTM over framed sequences.

        Parameters
        ----------
        tok : (B, T, P) token vectors of framed sentences (``<S>`` … ``</S>``), any padding after
        lengths : (B,) int64, each row's framed length (n + 2)
        state : initial state per layer, rows in the same order as ``tok``; zeros if None
        boundaries : False when the caller drops the ``<S>`` and ``</S>`` positions (inference
            only): nothing depends on the forward LM's step at ``</S>`` nor on the backward
            LM's step at ``<S>``, so both are skipped (one step in every row and layer). The
            biLSTM layers at those two positions are then not meaningful, and no state is
            returned.

        Returns
        -------
        layers : (L+1, B, T, 2·out) float — layer 0 = [tok, tok], layer l+1 = [fwd_l, bwd_l];
            positions past a row's length are zero
        state : each row's state after its last valid step (same row order); None when
            ``boundaries`` is False
        """
        bsz, steps, _ = tok.shape
        if state is None:
            state = self.lstm.zero_state(bsz, tok.device, tok.dtype)
        lengths = lengths.to(tok.device)
        # sort rows by length (descending) so that running rows form a prefix at every step
        order = torch.argsort(lengths, descending=True, stable=True)
        inv = torch.argsort(order)
        lens_sorted = lengths[order]
        tok_s = tok[order]
        state_s = [(c[:, order], h[:, order]) for c, h in state]
        rev = reverse_index(lens_sorted, steps)                       # (B, T)
        tok_b = tok_s.gather(1, rev[:, :, None].expand_as(tok_s))
        inference = not torch.is_grad_enabled()
        skip = 0 if boundaries or not inference else 1                # steps dropped per row
        run = [max(0, ln - skip) for ln in lens_sorted.tolist()]
        n_active = [sum(1 for ln in run if ln > t) for t in range(steps - skip)]
        x = torch.stack([tok_s[:, :steps - skip], tok_b[:, :steps - skip]])  # (2, B, T', P)
        if inference:
            layers, state_out = self._contextual_packed(tok, x, n_active, state_s, order, inv,
                                                        rev, lengths)
            return layers, (state_out if boundaries else None)
        outs, new_state = self.lstm(x, n_active, state_s)
        mask = (torch.arange(steps, device=tok.device)[None, :] < lens_sorted[:, None])
        mask = mask.to(tok.dtype)[:, :, None]                         # (B, T, 1)
        layers = [torch.cat([tok_s, tok_s], -1) * mask]
        for out in outs:
            fwd = out[0]
            bwd = out[1].gather(1, rev[:, :, None].expand_as(out[1]))  # back to original order
            layers.append(torch.cat([fwd, bwd], -1))
        stacked = torch.stack(layers)[:, inv]                         # (L+1, B, T, 2·out)
        state_out = [(c[:, inv], h[:, inv]) for c, h in new_state]
        return stacked, state_out

    def _contextual_packed(self, tok: Tensor, x: Tensor, n_active: Sequence[int],
                           state_s: LSTMState, order: Tensor, inv: Tensor, rev: Tensor,
                           lengths: Tensor) -> Tuple[Tensor, LSTMState]:
        """Inference: every packed output row is copied once, straight to its place in the
        result (rows in the caller's order, backward outputs back in forward time). ``x`` may
        be a step shorter than ``tok`` (see ``boundaries`` in :meth:`contextual`)."""
        bsz, steps, p = tok.shape
        packed, new_state, pos = self.lstm.run_packed(x, n_active, state_s)
        out_dim = self.opts.output_dim
        layers = tok.new_zeros(self.opts.n_layers + 1, bsz * steps, 2 * out_dim)
        mask = (torch.arange(steps, device=tok.device)[None, :] < lengths[:, None])
        tok_masked = (tok * mask.to(tok.dtype)[:, :, None]).reshape(bsz * steps, p)
        layers[0, :, :p] = tok_masked
        layers[0, :, p:] = tok_masked
        t, r = pos // bsz, pos % bsz                                  # sorted row r at step t
        base = order[r] * steps
        to_fwd = base + t
        to_bwd = base + rev[r, t]
        for layer, out in enumerate(packed, start=1):
            layers[layer, :, :out_dim].index_copy_(0, to_fwd, out[0])
            layers[layer, :, out_dim:].index_copy_(0, to_bwd, out[1])
        state_out = [(c[:, inv], h[:, inv]) for c, h in new_state]
        return layers.view(-1, bsz, steps, 2 * out_dim), state_out

    def forward(self, char_ids: Tensor, state: Optional[LSTMState] = None
                ) -> Tuple[Tensor, Tensor, LSTMState]:
        """(B, T, M) framed char ids → (layers (L+1, B, T, 2·out), mask (B, T), state)."""
        bsz, steps, m = char_ids.shape
        mask = (char_ids > 0).any(-1)                                 # (B, T)
        flat = char_ids.reshape(-1, m)
        uniq, inverse = torch.unique(flat, dim=0, return_inverse=True)
        tok = self.token_vectors(uniq)[inverse].reshape(bsz, steps, -1)
        lengths = mask.sum(1)
        layers, state = self.contextual(tok, lengths, state)
        return layers, mask, state

    def parameter_counts(self) -> dict:
        """Parameters per part: char embedding, CNN, highway, projection, LSTM."""
        cc = self.char_cnn
        counts = {
            "char_embedding": cc.char_embed.numel(),
            "convolutions": sum(p.numel() for p in cc.conv_w) + sum(p.numel() for p in cc.conv_b),
            "highway": sum(p.numel() for group in (cc.w_carry, cc.b_carry, cc.w_transform,
                                                     cc.b_transform) for p in group),
            "token_projection": 0 if cc.w_proj is None else cc.w_proj.numel() + cc.b_proj.numel(),
            "lstm": sum(p.numel() for p in self.lstm.parameters()),
        }
        counts["total"] = sum(counts.values())
        return counts
