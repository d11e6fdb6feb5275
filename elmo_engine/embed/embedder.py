"""Sentences → per-token layer vectors, fast and cached.

:class:`Embedder` turns tokenized sentences into arrays of shape ``(L+1, n_tokens, 2P)``
(``docs/checkpoint-format.md`` §9). It is **stateless** by default: a sentence gets the same
vectors whatever batch it is in, up to float rounding (the GEMMs' blocking depends on the rows
of the batch: up to ~2e-6 apart in layer 2 on the bundled model; layer 0 is exact).
:meth:`Embedder.embed_stateful` reproduces the reference tools' stateful protocol (§8) with
:meth:`Embedder.reset_state`.

Caches (:mod:`.caches`): the context-free token vector of every word type (exact; the char-CNN +
highway is then computed once per type), and per-sentence activations (in memory, LRU; optionally
on disk, keyed by the checkpoint hash and the tokens, written atomically, never pickled).

The embedder runs in the process's float32 matmul mode, which
:func:`elmo_engine.runtime.configure` sets to strict float32 (the entry points call it).

Threads (:mod:`elmo_engine.sharing`): :meth:`Embedder.embed` and :meth:`Embedder.token_vectors`
may be called from several threads at once, each getting what it would get alone: the caches
are behind one lock, forward passes run side by side (the model keeps no per-call state of its
own), and a move to the CPU after a GPU out-of-memory waits until no pass is running — of this
embedder or of any other over the same model (the lock is the model's); another embedder over
the model follows the move at its next pass.
:meth:`Embedder.embed_stateful` keeps one state by design: its calls take turns.
"""
from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import torch

from elmo_engine import runtime
from elmo_engine.embed.caches import SentenceCache, lru, resized
from elmo_engine.embed.device import PRECISIONS, check_cpu_precision, pick_device
from elmo_engine.embed.inputs import (MAX_EMBED_BYTES, check_finite_vectors,  # noqa: F401
                                      check_held_activations, validate_sentence)
from elmo_engine.embed.rows import longest_first, run_in_groups
from elmo_engine.model.bilm import BiLM, LSTMState
from elmo_engine.model.chars import BOS_TOKEN, EOS_TOKEN, char_ids_for_types
from elmo_engine.model.lstm_packed import cell_dtype
from elmo_engine.model.lstm_graphs import (GPU_BATCH_STEPS, GraphRunner, free_memory_rows,
                                           graphs_wanted)
from elmo_engine.model.tokenize import MAX_SENTENCE_TOKENS  # noqa: F401  (imported from here)
from elmo_engine.errors import InputError
from elmo_engine.progress import TaskState, check, report
from elmo_engine.sharing import model_lock

log = logging.getLogger(__name__)

#: fewest rows the char-CNN is run on (smaller chunks of missing types are padded): one BLAS
#: kernel for every chunk, so a type's vector is the same whatever was computed beside it
MIN_TYPE_ROWS = 16
class Embedder:
    """Run a :class:`BiLM` over sentences.

    Parameters
    ----------
    model : a loaded biLM (``elmo_engine.model.checkpoint.load_checkpoint``)
    device : "cpu", "cuda", "cuda:1", or None for CUDA when available
    precision : "fp32" (default), or "fp16"/"bf16" on GPU, "bf16" on a CPU with bf16 units
        (:func:`elmo_engine.runtime.cpu_bf16`); opt-in, not conformant (fidelity:
        ``scripts/bf16_fidelity.py``)
    token_budget : most padded framed tokens per batch (rows × longest row)
    cache_size : sentences kept in the in-memory activation cache
    cache_dir : optional folder for the on-disk activation cache
    on_warning : called with a message when the embedder has to adapt (out of memory, CPU fallback)
    max_batch_rows : most sentences per batch; None: 512, or with CUDA graphs on CUDA as many
        as half the free GPU memory holds at 64 framed tokens
        (:func:`.lstm_graphs.gpu_batch_rows`, at most :data:`.lstm_graphs.GPU_MAX_ROWS`), with
        ``token_budget`` raised to match
    cuda_graphs : run the LSTM's step loop as CUDA graphs per shape bucket
        (:mod:`elmo_engine.model.lstm_graphs`). None: off, unless the environment sets
        ``ELMO_EXPLORER_CUDA_GRAPHS=1`` and the device is CUDA (opt-in until measured on a
        GPU). True on the CPU runs the same bucketed loop eagerly (for tests); the results are
        the packed path's to float rounding
    """

    def __init__(self, model: BiLM, device: Optional[str] = None, precision: str = "fp32",
                 token_budget: int = 2048, cache_size: int = 20_000,
                 cache_dir=None, on_warning: Optional[Callable[[str], None]] = None,
                 max_batch_rows: Optional[int] = None, max_types: int = 200_000,
                 cuda_graphs: Optional[bool] = None):
        if precision not in PRECISIONS:
            raise InputError(f"unknown precision '{precision}' (use fp32, fp16 or bf16)")
        self.device = pick_device(device)
        if self.device.type != "cuda":
            check_cpu_precision(precision)
        self.precision = precision
        self.dtype = PRECISIONS[precision]
        # the model's own lock: another embedder over the model may be running a pass on it
        self._model_lock = model_lock(model)
        with self._model_lock.exclusive():
            self.model = model.to(self.device, self.dtype).eval()
            self.model.requires_grad_(False)
        self.opts = model.opts
        self.token_budget = max(1, int(token_budget))
        self._graphs_said = cuda_graphs is not None
        self.cuda_graphs = graphs_wanted(cuda_graphs, self.device)
        if max_batch_rows is None and self.device.type == "cuda" and self.cuda_graphs:
            max_batch_rows = free_memory_rows(model.opts, self.dtype, self.device)
            self.token_budget = max(self.token_budget, max_batch_rows * GPU_BATCH_STEPS)
        self.max_batch_rows = max(1, int(512 if max_batch_rows is None else max_batch_rows))
        self._graphs_on_cpu = self.device.type != "cuda"      # asked for on the CPU: tests
        with self._model_lock.exclusive():      # the loop is the model's: not under a pass
            self._set_graphs()
        self.on_warning = on_warning
        info = getattr(model, "info", None)
        self.checksum = info.checksum if info is not None else _model_digest(model)
        self._cache_root = Path(cache_dir) / self.checksum[:16] if cache_dir else None
        self.sentence_cache = self._sentence_cache(cache_size)
        # word type → token-layer vector; bounded so that a long session over a large corpus
        # does not grow without limit
        self.max_types = max(10_000, int(max_types))
        self._types = lru(self.max_types)
        self._slots: Optional[LSTMState] = None
        self.stats = {"sentence_hits": 0, "sentence_misses": 0, "types_computed": 0}
        # threads: the caches and stats under _lock; forward passes hold _model_lock (the
        # model's, shared with every other user of it) shared and a move of the model holds it
        # alone (always taken before _lock); stateful calls take turns on _stateful_lock
        self._lock = threading.RLock()
        self._stateful_lock = threading.Lock()

    # ---- token layer -----------------------------------------------------------------------
    def _ensure_types(self, types: Sequence[str]) -> None:
        """Make sure every type has its vector cached (and mark them as recently used). The
        caller holds ``_model_lock`` shared and ``_lock``."""
        missing = []
        for t in dict.fromkeys(types):
            if self._types.get(t) is None:             # (a hit counts as a use)
                missing.append(t)
        if not missing:
            return
        m = self.opts.max_characters_per_token
        with torch.inference_mode():
            for start in range(0, len(missing), 4096):
                chunk = missing[start:start + 4096]
                # a chunk of fewer than MIN_TYPE_ROWS rows is padded with its first type: the
                # BLAS takes another kernel for 1-4 rows, whose roundings differ (~1e-7), and a
                # type's vector must not depend on which types were missing beside it (what
                # another caller had cached first: tests/engine/test_concurrency.py)
                rows = chunk + chunk[:1] * max(0, MIN_TYPE_ROWS - len(chunk))
                ids = torch.from_numpy(char_ids_for_types(rows, m)).to(self.device)
                vecs = self.model.token_vectors(ids)[:len(chunk)]   # (len(chunk), P)
                for t, v in zip(chunk, vecs):
                    # a copy: a row view would keep the whole (len(chunk), P) tensor alive as
                    # long as any of its words stays cached (memory grew with the input)
                    self._types[t] = v.clone()
        self.stats["types_computed"] += len(missing)

    def token_vectors(self, types: Sequence[str]) -> np.ndarray:
        """Context-free token-layer vectors ``(len(types), P)`` (float32)."""
        types = list(types)
        if not types:
            return np.zeros((0, self.opts.projection_dim), np.float32)
        parts = []
        step = self.max_types // 2                    # a chunk never evicts its own types
        for start in range(0, len(types), step):
            chunk = types[start:start + step]
            with self._pass(), self._lock:
                self._ensure_types(chunk)
                rows = torch.stack([self._types[t] for t in chunk])
            parts.append(rows.float().cpu().numpy())
        return np.concatenate(parts)

    # ---- stateless --------------------------------------------------------------------------
    def embed(self, sentences: Sequence[Sequence[str]], state: Optional[TaskState] = None
              ) -> List[np.ndarray]:
        """Embed tokenized sentences; one ``(L+1, n, 2·out)`` float32 array per sentence.

        Sentences are sorted by length and batched by ``token_budget``; cached sentences are not
        recomputed. ``state`` reports progress (tokens done / total) and is checked for cancel
        between batches.
        """
        sents = [validate_sentence(s, i) for i, s in enumerate(sentences)]
        check_held_activations(sum(len(s) for s in sents), self.opts)
        results: List[Optional[np.ndarray]] = [None] * len(sents)
        todo: Dict[Tuple[str, ...], List[int]] = {}
        for i, s in enumerate(sents):
            if not s:
                results[i] = self._empty()
                continue
            hit = self._cache_get(s)
            if hit is not None:
                results[i] = hit
            else:
                todo.setdefault(s, []).append(i)
        keys = sorted(todo, key=len, reverse=True)
        total = sum(len(k) for k in keys)
        done = 0
        report(state, 0, total, "embedding")
        for batch in self._batches(keys):
            check(state)
            arrays = self._run_stateless(batch)
            for key, arr in zip(batch, arrays):
                check_finite_vectors(arr, key)
                self._cache_put(key, arr)
                for i in todo[key]:
                    results[i] = arr
                done += len(key)
            report(state, done, total, f"embedding ({done}/{total} tokens)")
        return results  # type: ignore[return-value]

    def _batches(self, keys: List[Tuple[str, ...]]):
        start = 0
        for size in self._group_sizes([len(k) for k in keys]):
            yield keys[start:start + size]
            start += size

    def _group_sizes(self, lengths: List[int]) -> List[int]:
        """Rows per batch of sentences of ``lengths``, longest first: each of at most
        ``token_budget`` padded tokens (its first row sets the width) and ``max_batch_rows``."""
        sizes: List[int] = []
        n = width = 0
        for length in lengths:
            w = max(width, length + 2)
            if n and (w * (n + 1) > self.token_budget or n >= self.max_batch_rows):
                sizes.append(n)
                n, w = 0, length + 2
            n += 1
            width = w
        return sizes + [n] if n else sizes

    def _run_stateless(self, batch: List[Tuple[str, ...]], fell_back: bool = False
                       ) -> List[np.ndarray]:
        try:
            layers, _ = self._forward(batch, None, boundaries=False)
        except torch.cuda.OutOfMemoryError:
            return self._retry_smaller(batch, fell_back)
        return [layers[:, r, 1:len(s) + 1].float().cpu().numpy() for r, s in enumerate(batch)]

    def _retry_smaller(self, batch, fell_back: bool = False):
        torch.cuda.empty_cache()
        if len(batch) > 1:
            half = len(batch) // 2
            self._warn(f"GPU out of memory on a batch of {len(batch)} sentences; retrying in "
                       "smaller batches")
            return self._run_stateless(batch[:half]) + self._run_stateless(batch[half:])
        if fell_back:                            # nowhere left to fall back to
            raise InputError(f"out of memory on a sentence of {len(batch[0])} tokens even on the "
                             "CPU; split it into shorter sentences")
        self._warn("GPU out of memory on a single sentence of "
                   f"{len(batch[0])} tokens; falling back to the CPU")
        self._move(torch.device("cpu"))
        return self._run_stateless(batch, fell_back=True)

    def _move(self, device: torch.device) -> None:
        with self._model_lock.exclusive(), self._lock:   # no pass runs while the model moves
            self._move_now(device)

    def _sentence_cache(self, size: int) -> SentenceCache:
        """The activation cache of this checkpoint and the current precision (on disk in a
        folder of its own per precision)."""
        opts = self.opts
        folder = self._cache_root / self.precision if self._cache_root is not None else None
        return SentenceCache(size, folder, lambda n: (opts.n_output_layers, n,
                                                      2 * opts.output_dim), self._warn)

    def _move_now(self, device: torch.device, dtype: Optional[torch.dtype] = None) -> None:
        """Move the model to ``device`` (and float32 where the CPU cannot run its dtype), or,
        given ``dtype``, follow where another embedder moved it; the caches follow (a new
        precision starts a new sentence cache: its vectors are not the old precision's)."""
        self.device = device
        before = self.precision
        if dtype is not None:
            self.dtype = dtype
            self.precision = next(k for k, v in PRECISIONS.items() if v == dtype)
        elif device.type == "cpu" and self.dtype != torch.float32 and not (
                self.dtype == torch.bfloat16 and runtime.cpu_bf16().offered):
            self.dtype, self.precision = torch.float32, "fp32"
        if self.precision != before:
            self.sentence_cache = self._sentence_cache(self.sentence_cache.size)
        self.model.to(device, self.dtype)
        self._set_graphs()
        self._types = resized(self._types, self.max_types, lambda v: v.to(device, self.dtype))
        if self._slots is not None:              # the stateful protocol keeps its state
            self._slots = [(c.to(device, cell_dtype(self.dtype)), h.to(device, self.dtype))
                           for c, h in self._slots]

    def _placement(self) -> Tuple[torch.device, torch.dtype]:
        return self.model.device, self.model.dtype

    def _placed(self) -> bool:
        """Whether the model is where this embedder runs it (another embedder over it moves it
        after a GPU out-of-memory)."""
        device, dtype = self._placement()
        here = self.device
        return (dtype == self.dtype and device.type == here.type
                and (device.index or 0) == (here.index or 0))

    @contextlib.contextmanager
    def _pass(self) -> Iterator[None]:
        """Hold the model for a pass (shared with every other pass over it), on the device
        and dtype it is on now: where another embedder moved it, this one follows first."""
        while True:
            with self._model_lock.shared():
                if self._placed():
                    yield
                    return
            with self._model_lock.exclusive(), self._lock:
                if not self._placed():
                    device, dtype = self._placement()
                    self._warn(f"the model was moved to {device} ({dtype}) by another of "
                               "its users; following it")
                    self._move_now(device, dtype)

    def _set_graphs(self) -> None:
        """The bucketed loop (CUDA graphs) on where ``cuda_graphs`` asks, off after a fall back
        to the CPU unless asked for the CPU too. The setting belongs to the model, which other
        embedders may share: one that did not say leaves another's choice alone (but on the
        CPU)."""
        on = self.cuda_graphs and (self.device.type == "cuda" or self._graphs_on_cpu)
        held = self.model.lstm.graphs
        if on:
            self.model.lstm.graphs = held or GraphRunner()
        elif self._graphs_said or (self.device.type != "cuda" and not self._graphs_on_cpu):
            self.model.lstm.graphs = None

    def _warn(self, msg: str) -> None:
        log.warning(msg)
        if self.on_warning is not None:
            self.on_warning(msg)

    def _forward(self, batch: Sequence[Sequence[str]], init: Optional[LSTMState],
                 boundaries: bool = True):
        """Framed batch → (layers (L+1, B, T, 2·out), final state). With ``boundaries``
        False the ``<S>``/``</S>`` positions are not meaningful and the state is None (see
        :meth:`BiLM.contextual`)."""
        # the type cache is read and filled by every caller
        with self._pass(), self._lock:
            self._ensure_types([BOS_TOKEN, EOS_TOKEN, *(t for s in batch for t in s)])
            steps = max(len(s) for s in batch) + 2
            p = self.opts.projection_dim
            tok = torch.zeros(len(batch), steps, p, device=self.device, dtype=self.dtype)
            for r, s in enumerate(batch):
                framed = [BOS_TOKEN, *s, EOS_TOKEN]
                tok[r, :len(framed)] = torch.stack([self._types[t] for t in framed])
        lengths = torch.tensor([len(s) + 2 for s in batch])
        return self.contextual(tok, lengths, init, boundaries)

    def contextual(self, tok: torch.Tensor, lengths: torch.Tensor,
                   init: Optional[LSTMState] = None, boundaries: bool = True):
        """:meth:`BiLM.contextual` on this embedder's device and dtype, in inference mode:
        framed token vectors ``tok`` (B, T, P) and their ``lengths`` (B,) → (layers
        (L+1, B, T, 2·out), final state). The one way to run the model beside other callers:
        it may run while other passes run, never while the model moves."""
        with self._pass():
            dev, dtype = self.device, self.dtype
            if init is not None:                  # (the cell state stays float32 in bf16/fp16)
                init = [(c.to(dev, cell_dtype(dtype)), h.to(dev, dtype)) for c, h in init]
            with torch.inference_mode():
                return self.model.contextual(tok.to(dev, dtype), lengths.to(dev), init,
                                             boundaries=boundaries)

    # ---- stateful (reference protocol, docs/checkpoint-format.md §8) -------------------------
    def reset_state(self) -> None:
        """Set every LSTM state slot back to zero."""
        with self._stateful_lock:
            self._slots = None

    def embed_stateful(self, sentences: Sequence[Sequence[str]], batch_size: int = 64,
                       state: Optional[TaskState] = None) -> List[np.ndarray]:
        """Run sentences in order, ``batch_size`` at a time; row *r* keeps LSTM state slot *r*.

        The state persists across calls until :meth:`reset_state`. No caching: results depend
        on history by design, so calls from several threads take turns (each call runs whole,
        on the state the previous one left).
        """
        sents = [validate_sentence(s, i) for i, s in enumerate(sentences)]
        with self._stateful_lock:
            return self._embed_stateful(sents, batch_size, state)

    def _embed_stateful(self, sents: List[Tuple[str, ...]], batch_size: int,
                        state: Optional[TaskState]) -> List[np.ndarray]:
        out: List[np.ndarray] = []
        total = len(sents)
        for start in range(0, total, batch_size):
            check(state)
            batch = sents[start:start + batch_size]
            self._grow_slots(len(batch))
            assert self._slots is not None                  # grown above
            init = [(c[:, :len(batch)], h[:, :len(batch)]) for c, h in self._slots]
            arrays, final = self._stateful_budgeted(batch, init)
            for key, arr in zip(batch, arrays):
                check_finite_vectors(arr, key)
            self._slots = [(torch.cat([cf, c[:, len(batch):]], 1), torch.cat([hf, h[:, len(batch):]], 1))
                           for (cf, hf), (c, h) in zip(final, self._slots)]
            out.extend(arrays)
            report(state, min(start + batch_size, total), total, "embedding (stateful)")
        return out

    def _stateful_budgeted(self, batch, init: LSTMState):
        """A stateful batch in groups of rows within the token budget (:mod:`.rows`)."""
        groups = longest_first([len(s) for s in batch], self._group_sizes)
        return run_in_groups(batch, init, groups, self._stateful_rows) if len(groups) > 1 \
            else self._stateful_rows(batch, init)

    def _stateful_rows(self, batch, init: LSTMState, fell_back: bool = False):
        """One stateful batch → (arrays, final state). Each row has its own state slot, so a
        batch that runs out of GPU memory is split by rows, then moved to the CPU."""
        try:
            layers, final = self._forward(batch, init)
        except torch.cuda.OutOfMemoryError:
            torch.cuda.empty_cache()
            if len(batch) > 1:
                self._warn(f"GPU out of memory on a batch of {len(batch)} sentences; retrying in "
                           "smaller batches")
                h = len(batch) // 2
                return run_in_groups(batch, init, [list(range(h)), list(range(h, len(batch)))],
                                     lambda b, i: self._stateful_rows(b, i, fell_back))
            if fell_back:
                raise InputError(f"out of memory on a sentence of {len(batch[0])} tokens even on "
                                 "the CPU; split it into shorter sentences") from None
            self._warn("GPU out of memory on a single sentence of "
                       f"{len(batch[0])} tokens; falling back to the CPU")
            self._move(torch.device("cpu"))
            init = [(c.to(self.device, cell_dtype(self.dtype)), x.to(self.device, self.dtype))
                    for c, x in init]
            return self._stateful_rows(batch, init, fell_back=True)
        arrays = [layers[:, r, 1:len(s) + 1].float().cpu().numpy() for r, s in enumerate(batch)]
        return arrays, final

    def _grow_slots(self, n: int) -> None:
        have = 0 if self._slots is None else self._slots[0][0].shape[1]
        if have < n:                      # the cell state float32 in bf16/fp16, as the pass keeps it
            extra = [(c.to(cell_dtype(self.dtype)), h) for c, h in
                     self.model.lstm.zero_state(n - have, self.device, self.dtype)]
            self._slots = extra if self._slots is None else [
                (torch.cat([c, ce], 1), torch.cat([h, he], 1))
                for (c, h), (ce, he) in zip(self._slots, extra)]

    # ---- caches -------------------------------------------------------------------------------
    def _empty(self) -> np.ndarray:
        return np.zeros((self.opts.n_output_layers, 0, 2 * self.opts.output_dim), np.float32)

    @property
    def cache_size(self) -> int:
        """Sentences kept in the in-memory activation cache (settable)."""
        return self.sentence_cache.size

    @cache_size.setter
    def cache_size(self, size: int) -> None:
        with self._lock:
            self.sentence_cache.size = size

    @property
    def cache_dir(self) -> Optional[Path]:
        """The on-disk activation cache of this checkpoint and precision (None: off)."""
        return self.sentence_cache.folder

    def _cache_get(self, key: Tuple[str, ...]) -> Optional[np.ndarray]:
        with self._lock:
            arr = self.sentence_cache.get(key)
            self.stats["sentence_hits" if arr is not None else "sentence_misses"] += 1
        return arr

    def _cache_put(self, key: Tuple[str, ...], arr: np.ndarray) -> None:
        with self._lock:
            self.sentence_cache.put(key, arr)

    def clear_cache(self) -> None:
        with self._lock:
            self.sentence_cache.clear()
            self._types.clear()


def _model_digest(model: BiLM) -> str:
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().float().cpu().numpy().tobytes())
    return h.hexdigest()
