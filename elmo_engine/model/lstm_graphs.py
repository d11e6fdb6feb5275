"""The biLSTM's inference on a GPU: the step loop captured as CUDA graphs, one per shape bucket.

The LSTM of Peters et al. 2018 ("Deep contextualized word representations"; TensorFlow's
``LSTMCell`` with projection, docs/checkpoint-format.md §7) runs step after step. On a GPU each
step is a dozen small kernels, and at a batch of a few hundred sentences the launches, not the
arithmetic, bound the speed (docs/performance.md, "On a GPU": fp32 and fp16 ran at the same
75k tokens/s). A CUDA graph records every kernel of the whole stack's loop once and replays
them with one launch.

A graph has fixed shapes, so:

* **Shape buckets.** The batch is padded to a bucket of rows (powers of two from
  ``GraphConfig.min_rows``) and of steps (a multiple of ``GraphConfig.step_multiple``); one
  graph per (rows, steps, dtype) bucket, at most ``GraphConfig.max_graphs`` kept.
* **Masked, dense steps.** Every step runs all rows (:func:`run_dense`); a row past its length
  keeps its state (``torch.where`` on the step's mask) and its outputs are not read, so padding
  changes nothing (``tests/engine/test_lstm_graphs.py`` checks the bucketed loop against the
  unpadded one to 1e-6 on the CPU, and both against the packed CPU path).
* **Fallback.** On the CPU, or when capturing fails (an old driver, a kernel that cannot be
  captured), the same bucketed loop runs eagerly; a failed bucket is not tried again.

:func:`gpu_batch_rows` picks the rows of a batch from the free GPU memory
(``torch.cuda.mem_get_info``), capped at :data:`GPU_MAX_ROWS`.
"""
from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

if TYPE_CHECKING:
    from elmo_engine.model.lstm import LSTMState, LSTMStack
    from elmo_engine.model.options import BiLMOptions

log = logging.getLogger(__name__)

#: the most rows :func:`gpu_batch_rows` gives a batch (a bucket of 4,096 rows × 32 steps of the
#: full model holds ~6 GB of activations in fp32; more rows gain nothing once the GEMMs are big)
GPU_MAX_ROWS = 4096


#: the framed length a CUDA batch's rows are sized for (sentences of ~60 tokens)
GPU_BATCH_STEPS = 64
#: "1" turns CUDA graphs on for embedders on CUDA that do not say (``benchmarks/gpu_check.sh``)
CUDA_GRAPHS_ENV = "ELMO_EXPLORER_CUDA_GRAPHS"


def graphs_wanted(asked: Optional[bool], device: torch.device) -> bool:
    """Whether an embedder on ``device`` runs the bucketed loop: as ``asked``, or where it did
    not say (None) only on CUDA with ``ELMO_EXPLORER_CUDA_GRAPHS=1`` in the environment
    (opt-in until measured on a GPU)."""
    if asked is not None:
        return asked
    return os.environ.get(CUDA_GRAPHS_ENV, "") == "1" and device.type == "cuda"


def free_memory_rows(opts: "BiLMOptions", dtype: torch.dtype, device: torch.device) -> int:
    """:func:`gpu_batch_rows` for the CUDA ``device``'s free memory now, at
    :data:`GPU_BATCH_STEPS` steps a row."""
    free, _ = torch.cuda.mem_get_info(device)
    return gpu_batch_rows(opts, GPU_BATCH_STEPS, dtype.itemsize, free)


@dataclass(frozen=True)
class GraphConfig:
    """The switches of the CUDA-graph path.

    Attributes
    ----------
    capture : capture CUDA graphs on a CUDA device (False: the bucketed loop runs eagerly)
    min_rows : the smallest batch bucket; buckets are the powers of two from here
    step_multiple : steps are rounded up to a multiple of this
    max_graphs : graphs kept at once (the least recently used is freed first)
    """

    capture: bool = True
    min_rows: int = 8
    step_multiple: int = 8
    max_graphs: int = 8


def bucket_rows(n: int, min_rows: int = 8) -> int:
    """The batch bucket of ``n`` rows: the smallest power of two ≥ max(n, min_rows)."""
    size = max(1, min_rows)
    while size < n:
        size *= 2
    return size


def bucket_steps(t: int, multiple: int = 8) -> int:
    """The step bucket of ``t`` steps: ``t`` rounded up to a multiple of ``multiple``."""
    multiple = max(1, multiple)
    return max(multiple, -(-t // multiple) * multiple)


def run_lengths(n_active: Sequence[int], rows: int) -> List[int]:
    """Each row's number of steps, from ``n_active`` (running rows per step, a prefix)."""
    return [sum(1 for n in n_active if n > r) for r in range(rows)]


def gpu_batch_rows(opts: "BiLMOptions", steps: int, element_bytes: int, free_bytes: int,
                   cap: int = GPU_MAX_ROWS) -> int:
    """Rows per batch that fit in half of ``free_bytes`` of GPU memory, at most ``cap``.

    Per row and step a pass holds about: the token vectors, each layer's input projection
    (2 directions × 4·D), the step's gates, cell and output (2 × (4·D + 2·D + out)) kept by
    the graph, every layer's outputs (2 × out) and the result (L+1 layers × 2·out), plus the
    result's float32 copy."""
    d, out, layers = opts.lstm_dim, opts.output_dim, opts.n_layers
    per_step = (opts.projection_dim + layers * (2 * 4 * d + 2 * (6 * d + out) + 2 * out)
                + (layers + 1) * 2 * out)
    per_row = max(1, steps) * (per_step * element_bytes + (layers + 1) * 2 * out * 4)
    return int(max(1, min(cap, (free_bytes // 2) // per_row)))


def run_dense(stack: "LSTMStack", x: Tensor, lengths: Tensor, state: "LSTMState"
              ) -> Tuple[List[Tensor], "LSTMState"]:
    """Every layer and step over all rows, masked: the loop that a CUDA graph captures.

    Parameters
    ----------
    x : (2, B, T, P) token vectors ([1] already reversed over each row's length, as for
        :meth:`LSTMStack.forward`)
    lengths : (B,) int64 steps per row (on ``x``'s device)
    state : initial (c, h) per layer, (2, B, D) and (2, B, out)

    Returns per layer the outputs (2, T, B, out) time-major (zero past a row's length) and
    each row's state after its last step. No host synchronisation (capturable)."""
    opts = stack.opts
    _, bsz, steps, _ = x.shape
    dim = opts.lstm_dim
    mask = torch.arange(steps, device=x.device)[:, None] < lengths[None, :]     # (T, B)
    keep_all = mask[None, :, :, None]                                           # (1, T, B, 1)
    layer_in = x.transpose(1, 2)                                                # (2, T, B, P)
    outputs: List[Tensor] = []
    new_state: "LSTMState" = []
    for layer in range(opts.n_layers):
        bias = (stack.b[layer] + stack.forget_bias).unsqueeze(1)               # (2, 1, 4D)
        flat = layer_in.reshape(2, steps * bsz, -1)
        xp = torch.baddbmm(bias, flat, stack.w_in[layer]).view(2, steps, bsz, 4 * dim)
        w_rec = stack.w_rec[layer]
        wp = stack.wp[layer] if opts.has_lstm_projection else None
        c, h = state[layer]
        hs = []
        for t in range(steps):
            z = torch.baddbmm(xp[:, t], h, w_rec)                              # (2, B, 4D)
            i, j, f, o = z.chunk(4, dim=2)
            c_new = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(j)
            if opts.cell_clip is not None:
                c_new = c_new.clamp(-opts.cell_clip, opts.cell_clip)
            m = torch.sigmoid(o) * torch.tanh(c_new)                           # (2, B, D)
            h_new = torch.bmm(m, wp) if wp is not None else m                  # (2, B, out)
            if wp is not None and opts.proj_clip is not None:
                h_new = h_new.clamp(-opts.proj_clip, opts.proj_clip)
            keep = keep_all[:, t]                                              # (1, B, 1)
            c = torch.where(keep, c_new, c)
            h = torch.where(keep, h_new, h)
            hs.append(h_new * keep)
        out = torch.stack(hs, 1)                                               # (2, T, B, out)
        if opts.use_skip_connections and layer > 0:
            out = out + layer_in * keep_all
        outputs.append(out)
        new_state.append((c, h))
        layer_in = out
    return outputs, new_state


def capturable(device: torch.device) -> bool:
    """Whether CUDA graphs can be captured on ``device`` (a CUDA device)."""
    return device.type == "cuda"


def _version(t: Tensor) -> int:
    """``t``'s version counter (bumped by in-place updates); -1 for an inference tensor."""
    try:
        return t._version
    except RuntimeError:
        return -1


class _Graph:
    """One captured bucket: static inputs, the graph, and its static outputs."""

    def __init__(self, stack: "LSTMStack", rows: int, steps: int, width: int, like: Tensor,
                 pool: Any):
        self.x = like.new_zeros(2, rows, steps, width)
        self.lengths = torch.zeros(rows, dtype=torch.long, device=like.device)
        self.state = stack.zero_state(rows, like.device, like.dtype)
        side = torch.cuda.Stream(like.device)
        side.wait_stream(torch.cuda.current_stream(like.device))
        with torch.cuda.stream(side):                  # warm-up off the capture (allocator)
            run_dense(stack, self.x, self.lengths, self.state)
        torch.cuda.current_stream(like.device).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        # thread_local: another thread's eager CUDA work (the token layer) does not break
        # the capture; one memory pool for all of a runner's graphs (see GraphRunner)
        with torch.cuda.graph(self.graph, pool=pool, capture_error_mode="thread_local"):
            self.outputs, self.final = run_dense(stack, self.x, self.lengths, self.state)

    def replay(self, x: Tensor, lengths: Tensor, state: "LSTMState"
               ) -> Tuple[List[Tensor], "LSTMState"]:
        self.x.copy_(x)
        self.lengths.copy_(lengths)
        for (c, h), (sc, sh) in zip(state, self.state):
            sc.copy_(c)
            sh.copy_(h)
        self.graph.replay()
        return ([o.clone() for o in self.outputs],          # the next replay overwrites them
                [(c.clone(), h.clone()) for c, h in self.final])


class GraphRunner:
    """The bucketed inference loop of one model, with its CUDA graphs (held by
    :attr:`LSTMStack.graphs`; set by ``Embedder(..., cuda_graphs=...)``).

    :meth:`run` returns what :func:`elmo_engine.model.lstm_packed.run_packed` returns, so the
    biLM reads its outputs the same way. Thread-safe: replays of one graph share its static
    buffers, so one lock serialises them (one GPU runs one graph at a time anyway).

    All of a runner's graphs share one memory pool, so that a handful of buckets do not each
    hold their own copy of a pass's activations. That is safe here because replays never
    overlap (the lock) and a replay's outputs are copied out before the lock is released:
    another graph may reuse the memory of this one's intermediates and outputs, but never
    while they are read."""

    def __init__(self, config: GraphConfig = GraphConfig()):
        self.config = config
        self._graphs: "OrderedDict[tuple, _Graph]" = OrderedDict()
        self._failed: Dict[tuple, str] = {}
        self._pool: Any = None                  # made with the first graph
        self._lock = threading.Lock()
        self.replays = 0                 # graph replays so far (benchmarks and tests read it)

    def __getstate__(self):
        return {"config": self.config}

    def __setstate__(self, state) -> None:
        GraphRunner.__init__(self, state["config"])

    def bucket(self, rows: int, steps: int) -> Tuple[int, int]:
        """(rows, steps) rounded up to this runner's buckets."""
        return (bucket_rows(rows, self.config.min_rows),
                bucket_steps(steps, self.config.step_multiple))

    def failed(self) -> Dict[tuple, str]:
        """Buckets whose capture failed, with the error (they run eagerly)."""
        return dict(self._failed)

    def drop(self) -> None:
        """Free every captured graph and their memory pool (they are captured again when next
        needed)."""
        with self._lock:
            self._graphs.clear()
            self._pool = None

    def run(self, stack: "LSTMStack", x: Tensor, n_active: Sequence[int], state: "LSTMState"
            ) -> Tuple[List[Tensor], "LSTMState", Tensor]:
        """Same arguments and results as :func:`~elmo_engine.model.lstm_packed.run_packed`:
        per layer the (2, total, out) packed outputs, the final state, and ``pos``."""
        _, bsz, steps, width = x.shape
        rows_b, steps_b = self.bucket(bsz, steps)
        lengths = run_lengths(n_active, bsz)
        padded = x.new_zeros(2, rows_b, steps_b, width)
        padded[:, :bsz, :steps] = x
        lens = torch.zeros(rows_b, dtype=torch.long)
        lens[:bsz] = torch.tensor(lengths, dtype=torch.long)
        lens = lens.to(x.device)
        state_b = stack.zero_state(rows_b, x.device, x.dtype)
        for (c, h), (cb, hb) in zip(state, state_b):
            cb[:, :bsz] = c
            hb[:, :bsz] = h
        outs, final = self._run_bucket(stack, padded, lens, state_b)
        pos_t = [torch.arange(n, device=x.device) + t * bsz for t, n in enumerate(n_active) if n]
        pos = torch.cat(pos_t) if pos_t else torch.zeros(0, dtype=torch.long, device=x.device)
        t_idx, r_idx = pos // bsz, pos % bsz
        packed = [o[:, t_idx, r_idx] for o in outs]                     # (2, total, out)
        new_state: "LSTMState" = [(c[:, :bsz], h[:, :bsz]) for c, h in final]
        return packed, new_state, pos

    def _run_bucket(self, stack: "LSTMStack", x: Tensor, lengths: Tensor, state: "LSTMState"
                    ) -> Tuple[List[Tensor], "LSTMState"]:
        if not (self.config.capture and capturable(x.device)):
            return run_dense(stack, x, lengths, state)
        params = tuple((p.data_ptr(), _version(p)) for p in stack.parameters())
        key = (x.shape[1], x.shape[2], x.dtype, str(x.device), params)
        with self._lock:
            if key in self._failed:
                return run_dense(stack, x, lengths, state)
            graph = self._graphs.get(key)
            if graph is None:
                try:
                    if self._pool is None:
                        self._pool = torch.cuda.graph_pool_handle()
                    graph = _Graph(stack, x.shape[1], x.shape[2], x.shape[3], x, self._pool)
                except (RuntimeError, torch.cuda.OutOfMemoryError) as err:
                    self._failed[key] = str(err).splitlines()[0] if str(err) else repr(err)
                    log.warning("CUDA graph capture failed for a bucket of %d rows × %d "
                                "steps (%s); running it eagerly", x.shape[1], x.shape[2],
                                self._failed[key])
                    return run_dense(stack, x, lengths, state)
                self._graphs[key] = graph
                while len(self._graphs) > max(1, self.config.max_graphs):
                    self._graphs.popitem(last=False)
            self._graphs.move_to_end(key)
            self.replays += 1
            return graph.replay(x, lengths, state)
