"""The CPU fast path of the biLM's inference: pre-packed oneDNN weights, directions side by side.

Everything here is exact up to float rounding, and each piece is checked against the plain
computation in ``tests/engine/test_bilm_fast_paths.py``:

* **Pre-packed weights.** A plain GEMM of a few rows by a 512 × 16384 LSTM weight spends most of
  its time re-packing the weight into the GEMM's blocked layout, at every call. On the CPU a copy
  of each layer-direction's ``W_rec`` and ``W_in`` is kept pre-packed into oneDNN's layout
  (through torch's private ``torch.ops.mkldnn`` operators): every step with at least
  ``packed_min_rows`` running rows uses the packed ``W_rec`` (with the step's input projection
  added in the same call), and input projections of at most ``packed_input_max_rows`` rows use
  the packed ``W_in``. In bf16 every input projection uses the packed ``W_in`` and the cell's
  projection ``W_p`` is packed too (in float32 those keep MKL's GEMMs, whose rounding the
  conformance figures were taken with; in bf16 the packed products are the same to the bit).
  A packed copy serves any number of rows.
* **One fallback point.** :meth:`FastKernels.packed_weight` is the only place that decides
  whether a packed weight can be used: it answers None when packing is switched off, the weight
  is not a float32 or bfloat16 CPU tensor, or this torch build fails :func:`onednn_packing`'s
  self-test,
  and every caller then takes the plain GEMM. No other module calls ``torch.ops.mkldnn``.
* **Directions side by side.** The forward and backward LMs share nothing but their input; for
  batches of ``parallel_min_rows`` rows or more :func:`both_directions` runs them in two threads
  with half the cores each.
* **Scratch buffers.** Large input projections go to a reusable buffer per thread (a thread
  runs one direction at a time).
* **Shared by threads.** A model may run in several threads at once: the packed copies are
  made under a lock and only read afterwards, scratch buffers belong to the thread that uses
  them, and every calling thread has its own pair of direction threads, so no call waits on
  another's (``tests/engine/test_concurrency.py``).

The switches are a :class:`FastPath` held by each model (``BiLM.fast_path``), not module state.
"""
from __future__ import annotations

import functools
import os
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple, TypeVar

import torch
from torch import Tensor

T_ = TypeVar("T_")

#: per calling thread: ``pool`` = (owning process, that caller's pair of direction threads)
_callers = threading.local()
#: held while a call reads its thread count and its workers set theirs, until it has put its
#: own back: the set is process-wide for a moment, and another call reading it then took half
#: (1 of 2: its directions one after the other; a CI run's held-pass test waited on them)
_thread_count_lock = threading.Lock()
#: weights of these types are packed (bf16 only reaches the CPU where it has bf16 units: the
#: embedder checks :func:`elmo_engine.runtime.cpu_bf16`); packed bf16 halves each step's weight
#: traffic, which bounds the recurrent GEMM of a few rows
PACKED_DTYPES = (torch.float32, torch.bfloat16)
#: a scratch buffer larger than this is freed after the call that needed it
SCRATCH_KEEP_BYTES = 256 << 20


@dataclass(frozen=True)
class FastPath:
    """The switches of the CPU fast path (the defaults are the measured best; see
    ``benchmarks/bench_bilm.py --crossover`` and ``--gemm``).

    Attributes
    ----------
    packed_weights : use weights pre-packed for oneDNN (False: plain GEMMs only)
    packed_min_rows : the packed recurrent GEMM from this many running rows on (one row is a
        matrix-vector product, which packing does not speed up)
    packed_input_max_rows : packed input projections up to this many rows (larger GEMMs
        amortise their own packing; in bf16 every input projection is packed)
    parallel_min_rows : from this many rows on, the directions run side by side, a core each;
        fewer run one after the other with every core, so that only one layer's weights (40 MB
        in the full model) are streamed at a time. With packed weights side by side won from 2
        rows on a shared 2-core Xeon (202 against 214 ms at 2 rows, 831 against 917 ms at 64);
        without them the crossover had fallen between 8 and 64 rows.
    """

    packed_weights: bool = True
    packed_min_rows: int = 2
    packed_input_max_rows: int = 128
    parallel_min_rows: int = 2


@functools.lru_cache(maxsize=None)
def onednn_packing() -> bool:
    """Whether this torch build can pre-pack weights for oneDNN's GEMM (CPU builds with
    oneDNN/mkldnn), checked once on small matrices against plain products."""
    try:
        w = torch.arange(48, dtype=torch.float32).view(6, 8) / 7       # (in, out)
        a = torch.arange(18, dtype=torch.float32).view(3, 6) / 5
        other = torch.ones(3, 8)
        packed = torch.ops.mkldnn._reorder_linear_weight(w.t().contiguous(), 3)
        plain = torch.ops.mkldnn._linear_pointwise(a, packed, other[0], "none", [], "")
        summed = torch.ops.mkldnn._linear_pointwise.binary(a, other, packed, None, "add")
        return (bool(torch.backends.mkldnn.is_available())
                and torch.allclose(plain, a @ w + 1) and torch.allclose(summed, a @ w + 1))
    except (AttributeError, RuntimeError, NotImplementedError):
        return False


def _caller_pool() -> ThreadPoolExecutor:
    """This calling thread's own pair of direction threads (made on first use).

    Each caller has its own pair, so two callers never wait on each other's tasks: with one
    shared pair, two callers could each hold one of its threads while waiting for the other
    (the tasks of one call wait for each other), and neither could go on. The pair lives in
    the caller's thread-local storage and ends with the caller: when the thread is gone its
    executor is collected, which stops the pair's threads (``ThreadPoolExecutor`` wakes its
    workers to exit when it is garbage-collected). A forked child has none of the parent's
    threads: the pid check makes a new pair there."""
    held = getattr(_callers, "pool", None)
    if held is None or held[0] != os.getpid():
        held = _callers.pool = (os.getpid(), ThreadPoolExecutor(
            2, thread_name_prefix=f"bilm-direction-{threading.current_thread().name}"))
    return held[1]


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

    Safe to call from several threads at once: every calling thread has its own pair of
    direction threads (:func:`_caller_pool`), so the tasks of one call wait only for each
    other and for their own caller, never for another call's. The moment from reading the
    caller's count to putting it back is one call's at a time (:data:`_thread_count_lock`):
    the workers' set is seen process-wide until then, and a call reading it in that moment ran
    its directions one after the other.
    """
    if device.type != "cpu" or not parallel:
        return [fn(0), fn(1)]
    inference = torch.is_inference_mode_enabled()
    grad = torch.is_grad_enabled()
    configured = [threading.Event(), threading.Event()]
    restored = threading.Event()

    def task(direction: int, per_worker: int) -> T_:
        try:
            if torch.get_num_threads() != per_worker:  # (the get initialises this thread's
                torch.set_num_threads(per_worker)      # own setting, so the set sticks)
        finally:
            configured[direction].set()
        restored.wait()
        with torch.inference_mode(inference), torch.set_grad_enabled(grad):
            return fn(direction)

    with _thread_count_lock:
        threads = torch.get_num_threads()
        if threads >= 2:                  # the caller's own pair: never busy with another call
            pool, per_worker = _caller_pool(), max(1, threads // 2)
            try:
                futures = [pool.submit(task, d, per_worker) for d in (0, 1)]
                for event in configured:
                    event.wait()
                torch.set_num_threads(threads)
            finally:
                restored.set()
    if threads < 2:
        return [fn(0), fn(1)]
    wait(futures)
    return [f.result() for f in futures]


class FastKernels:
    """The fast path's per-model state and GEMMs: packed weights and scratch buffers.

    Held by :class:`~elmo_engine.model.lstm.LSTMStack`. Copies (``copy.deepcopy``, pickling)
    keep the switches and leave the caches behind: the packed weights are opaque oneDNN
    tensors that cannot be copied, and both caches are rebuilt on demand.

    Shared by every thread that runs the model: the packed copies are read-only once made and
    are made under a lock; the scratch buffers are per thread (a buffer is written by one
    forward pass and read by it step after step, so two passes must never share one).
    """

    def __init__(self, config: FastPath = FastPath()):
        self.config = config
        # (weight, layer, direction) → ((version, data pointer), packed copy); under _lock
        self._packed: Dict[Tuple[str, int, int], Tuple[Tuple[int, int], Tensor]] = {}
        self._lock = threading.Lock()
        self._local = threading.local()         # .scratch: this thread's buffer

    def __getstate__(self):
        return {"config": self.config}

    def __setstate__(self, state) -> None:
        FastKernels.__init__(self, state["config"])

    # ---- packed weights ---------------------------------------------------------------------
    def packed_weight(self, name: str, layer: int, d: int, param: Tensor) -> Optional[Tensor]:
        """``param[d]`` (weight ``name`` of ``layer``) pre-packed into oneDNN's blocked GEMM
        layout; None where that does not apply (packing off, not a float32 or bfloat16 CPU
        tensor, a torch build without oneDNN) — the one fallback point: every caller then uses
        a plain GEMM.

        Packed once, the recurrent step's GEMM (with the input projection added in the same
        call) ran 1.9-2.9× faster on one core of a Xeon at 2-128 rows, and an 11-row input
        projection 2.4× faster (``benchmarks/bench_bilm.py --gemm``). The copy is kept per
        weight, layer and direction, and packed again (30-50 ms) when the weight changes: a new
        tensor, or an in-place update that bumps its version counter (writes through ``.data``
        do not, and need :meth:`drop_packed`)."""
        if not self.config.packed_weights or param.device.type != "cpu" \
                or param.dtype not in PACKED_DTYPES or not onednn_packing():
            return None
        try:
            version = param._version       # bumped by in-place updates (optimizer, load, copy_)
        except RuntimeError:                # an inference tensor: can change only in that mode
            version = -1
        key = (version, param.data_ptr())
        with self._lock:                        # packed once, whoever asks first
            held = self._packed.get((name, layer, d))
            if held is None or held[0] != key:
                self._packed.pop((name, layer, d), None)       # free the old copy before packing
                w_t = param.detach()[d].t().contiguous()       # (out, in), the layout oneDNN packs
                held = self._packed[(name, layer, d)] = (
                    key, torch.ops.mkldnn._reorder_linear_weight(w_t))
        return held[1]

    def packed_keys(self) -> set:
        """``{(weight, layer, direction)}`` of the packed copies held now."""
        with self._lock:
            return set(self._packed)

    def drop_packed(self) -> None:
        """Free the packed copies of the weights (they are rebuilt when next needed; a pass
        running now keeps the copies it already holds)."""
        with self._lock:
            self._packed.clear()

    # ---- GEMMs ------------------------------------------------------------------------------
    def recurrent_weight(self, layer: int, d: int, w_rec: Tensor, rows: int) -> Optional[Tensor]:
        """The packed ``W_rec`` for a run of ``rows`` rows, or None (plain GEMMs)."""
        if rows < self.config.packed_min_rows:
            return None
        return self.packed_weight("w_rec", layer, d, w_rec)

    def add_recurrent(self, z: Tensor, h: Tensor, w_rec: Tensor, packed: Optional[Tensor]
                      ) -> Tensor:
        """``z + h @ w_rec`` for a step of ``n = len(h)`` rows: with the packed weight from
        ``packed_min_rows`` rows on (a new tensor), else in place into ``z``."""
        if packed is not None and h.shape[0] >= self.config.packed_min_rows:
            return torch.ops.mkldnn._linear_pointwise.binary(h, z, packed, None, "add")
        return z.addmm_(h, w_rec)

    def input_projection(self, layer: int, d: int, w_in: Tensor, x: Tensor, bias: Tensor
                         ) -> Tensor:
        """``bias + x @ w_in[d]``: with the packed weights for a few rows (and for any number
        of rows in bf16), else into the direction's reusable scratch buffer.

        In bf16 the packed product is the same to the bit as the plain ``addmm`` and was
        1.14-1.17× faster at 699 and 1,633 rows (2 threads, AVX512_BF16 EPYC), allocation
        included; in float32 large GEMMs keep MKL's ``addmm``, whose rounding the conformance
        figures were taken with."""
        dim4 = w_in.shape[-1]
        if x.shape[0] <= self.config.packed_input_max_rows or w_in.dtype == torch.bfloat16:
            packed = self.packed_weight("w_in", layer, d, w_in)
            if packed is not None:
                return torch.ops.mkldnn._linear_pointwise(x.contiguous(), packed, bias, "none",
                                                          [], "")
        out = self.scratch(x.shape[0] * dim4, x).view(-1, dim4)
        return torch.addmm(bias, x, w_in[d], out=out)

    def project(self, layer: int, d: int, wp: Tensor, m: Tensor, out: Tensor) -> Tensor:
        """``out = m @ wp[d]``, the LSTM cell's projection of a step's ``n`` rows (n, D) → (n, P).

        In bf16 with at least ``packed_min_rows`` rows, with ``wp[d]`` pre-packed for oneDNN:
        the plain bf16 ``mm`` runs oneDNN's matmul on the unpacked weight, which re-blocks the
        4 MB weight at every step; the packed product is the same to the bit (the same
        ``avx512_core_bf16`` kernel) and ran 1.2× faster at 64 rows (profile:
        ``benchmarks/profile_bf16.py``). Float32 keeps MKL's ``mm``: oneDNN's packed product
        rounds differently (up to ~5e-6), and float32 results must not move."""
        if (wp.dtype == torch.bfloat16 and m.shape[0] >= self.config.packed_min_rows):
            packed = self.packed_weight("wp", layer, d, wp)
            if packed is not None:
                return out.copy_(torch.ops.mkldnn._linear_pointwise(m, packed, None, "none",
                                                                    [], ""))
        return torch.mm(m, wp[d], out=out)

    # ---- scratch buffers --------------------------------------------------------------------
    def scratch(self, numel: int, like: Tensor) -> Tensor:
        """A reusable buffer for the input projections: a fresh multi-hundred-MB allocation per
        call costs more in page faults than its GEMM saves (measured on the full model).

        The buffer belongs to the calling thread (and is freed when the thread ends): the
        projection written into it is read by the same pass, step by step, and a second pass
        in another thread must not overwrite it meanwhile. One buffer a thread is enough: a
        thread runs one direction at a time, layer after layer, and a layer's projection is
        read before the next layer writes its own."""
        buf = getattr(self._local, "scratch", None)
        if (buf is None or buf.numel() < numel or buf.device != like.device
                or buf.dtype != like.dtype):
            self._local.scratch = None                      # free the old one first
            buf = self._local.scratch = like.new_empty(numel)
        return buf[:numel]

    def release_large_scratch(self) -> None:
        """Do not hold on to a huge one-off buffer (over :data:`SCRATCH_KEEP_BYTES`)."""
        buf = getattr(self._local, "scratch", None)
        if buf is not None and buf.numel() * buf.element_size() > SCRATCH_KEEP_BYTES:
            self._local.scratch = None
