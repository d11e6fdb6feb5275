"""One model, several threads: every result equals the same call made alone.

The app runs two job lanes over one :class:`Embedder` and one :class:`BiLM` (and the corpus
build makes a second embedder over the same model). These tests make calls really overlap —
a barrier holds each pass at the point where it used to share a buffer, or several threads
embed many batches at once — and compare every vector with a sequential run. They failed on
the engine before the concurrency contract (docs/guide/engine.md, "Threads"): one shared
scratch buffer per direction gave vectors off by up to 6.5, and one shared pair of direction
threads could leave two callers waiting on each other for ever.
"""
from __future__ import annotations

import dataclasses
import os
import random
import threading
import time
from pathlib import Path
from typing import Callable, Dict, List

import numpy as np
import pytest
import torch

from elmo_engine import atomic
from elmo_engine.embed.embedder import Embedder
from elmo_engine.model.bilm import BiLM
from elmo_engine.model.checkpoint import load_checkpoint
from elmo_engine.model.cpu_fast import FastKernels, both_directions
from elmo_engine.model.options import BiLMOptions
from elmo_engine.sharing import SharedExclusiveLock

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "resources" / "demo_model"
JOIN_S = 120            # a thread still running after this is a hang: the test fails, never waits


@pytest.fixture
def threads():
    """``threads(n)``: set torch's intra-op thread count for this test (restored after)."""
    before = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def demo_model() -> BiLM:
    return load_checkpoint(DEMO)


@pytest.fixture(scope="module")
def published_small() -> BiLM:
    """Random weights in the layout of the published Small model (2x1024_128_2048cnn_1xhighway:
    2,048 character filters of widths 1-7, 1,024 cells projected to 128)."""
    opts = BiLMOptions(filters=((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512),
                                (7, 1024)), n_highway=1, projection_dim=128, lstm_dim=1024,
                       n_layers=2)
    model = BiLM(opts)
    gen = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.05)
    return model.eval()


def vocabulary() -> List[str]:
    words = (DEMO / "vocab.txt").read_text(encoding="utf-8").split()
    return [w for w in words if not w.startswith("<")][:3000]


def sentences(seed: int, n: int, longest: int = 30) -> List[List[str]]:
    """``n`` fresh random sentences (a different set per seed)."""
    rng = random.Random(seed)
    words = vocabulary()
    return [[rng.choice(words) for _ in range(rng.randint(2, longest))] for _ in range(n)]


def overlapped(calls: Dict[str, Callable[[], object]]) -> Dict[str, object]:
    """Run every call in its own thread at once; their results (or the first error raised).

    Each thread takes the calling thread's torch thread count first, as a job lane adopts the
    configured one (``runtime.adopt_thread_count``): a new thread starts from torch's default,
    so its passes would otherwise run with another count than the sequential ones compared."""
    out: Dict[str, object] = {}
    errors: List[BaseException] = []
    start = threading.Barrier(len(calls), timeout=JOIN_S)
    count = torch.get_num_threads()

    def run(name, fn):
        try:
            torch.set_num_threads(count)
            start.wait()
            out[name] = fn()
        except BaseException as e:          # reported in the test's thread
            errors.append(e)

    workers = [threading.Thread(target=run, args=item, daemon=True) for item in calls.items()]
    for w in workers:
        w.start()
    for w in workers:
        w.join(JOIN_S)
    assert not any(w.is_alive() for w in workers), "a call never returned (a deadlock)"
    if errors:
        raise errors[0]
    return out


def max_diff(got: List[np.ndarray], expected: List[np.ndarray]) -> float:
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape
    return max(float(np.abs(g - e).max(initial=0.0)) for g, e in zip(got, expected))


@pytest.mark.parametrize("n_threads", [1, 2, 4])
def test_threads_embedding_on_one_embedder_get_their_sequential_vectors(demo_model, threads,
                                                                        n_threads):
    """Three jobs on one embedder at once get the vectors each gets alone: to 1e-6, and where
    more threads are asked for than there are cores (4 on a 2-core host) to 1e-6 plus 4 float32
    ulps of the value, because the BLAS may then split a GEMM over fewer threads when calls
    overlap, which sums in another order (two CI runs on 2 cores: 1.19e-6 on values near 2.5).
    Vectors of another job, or a buffer shared between passes, differ by far more (0.1 and
    up)."""
    threads(n_threads)
    jobs = {f"job{k}": sentences(100 * n_threads + k, 60) for k in range(3)}
    alone = Embedder(demo_model, device="cpu", cache_size=0, token_budget=256)
    expected = {name: alone.embed(s) for name, s in jobs.items()}
    shared = Embedder(demo_model, device="cpu", cache_size=0, token_budget=256)
    got = overlapped({name: (lambda s=s: shared.embed(s)) for name, s in jobs.items()})
    oversubscribed = n_threads > (os.cpu_count() or 1)
    for name in jobs:
        assert max_diff(got[name], expected[name]) <= 1e-6 or (oversubscribed and all(
            np.allclose(g, e, rtol=4 * np.finfo(np.float32).eps, atol=1e-6)
            for g, e in zip(got[name], expected[name]))), name


def test_a_published_size_model_shared_by_threads(published_small, threads):
    threads(2)
    jobs = {f"job{k}": sentences(900 + k, 12, longest=20) for k in range(2)}
    alone = Embedder(published_small, device="cpu", cache_size=0)
    expected = {name: alone.embed(s) for name, s in jobs.items()}
    shared = Embedder(published_small, device="cpu", cache_size=0)
    got = overlapped({name: (lambda s=s: shared.embed(s)) for name, s in jobs.items()})
    for name in jobs:
        assert np.isfinite(np.concatenate([a.ravel() for a in got[name]])).all()
        assert max_diff(got[name], expected[name]) <= 1e-6, name


@pytest.mark.parametrize("n_threads", [1, 2])
def test_passes_held_mid_batch_never_share_a_buffer(demo_model, threads, n_threads, monkeypatch):
    """Every pass writes its input projection, then waits until the other pass has written
    its own before it runs the recurrence over it: the moment a shared buffer was overwritten."""
    threads(n_threads)
    model = load_checkpoint(DEMO)
    # every input projection through the scratch buffers (not the packed small-row GEMM)
    model.fast_path = dataclasses.replace(model.fast_path, packed_input_max_rows=0)
    jobs = {"a": sentences(11, 8), "b": sentences(12, 8)}
    expected = {name: Embedder(model, device="cpu", cache_size=0).embed(s)
                for name, s in jobs.items()}
    projection = FastKernels.input_projection
    # with two torch threads each pass runs its two directions in two threads of its own
    parties = 2 * (2 if n_threads >= 2 else 1)
    held = threading.Barrier(parties, timeout=20)
    waited = set()

    def holding(self, layer, d, w_in, x, bias):
        out = projection(self, layer, d, w_in, x, bias)
        key = (threading.get_ident(), d)
        if layer == 1 and key not in waited:
            waited.add(key)
            held.wait()                    # every pass has written its layer-1 projection
        return out

    monkeypatch.setattr(FastKernels, "input_projection", holding)
    shared = Embedder(model, device="cpu", cache_size=0)

    def embed(s):
        # as a job lane does (runtime.adopt_thread_count): a new thread starts from torch's
        # default, which the other pass's direction threads lower for a moment; picked up then,
        # this pass would run its directions one after the other (a CI run on two workers did)
        torch.set_num_threads(n_threads)
        return shared.embed(s)

    got = overlapped({name: (lambda s=s: embed(s)) for name, s in jobs.items()})
    assert len(waited) == 4          # both directions of both passes were held side by side
    for name in jobs:
        assert max_diff(got[name], expected[name]) <= 1e-6, name


def test_stateful_embedders_sharing_one_model(demo_model, threads):
    """Two embedders over one model, each with its own stateful protocol (state carried over
    from one call to the next), run at once: each equals its run alone."""
    threads(2)
    parts = {name: [sentences(seed, 6), sentences(seed + 1, 6)]
             for name, seed in (("a", 31), ("b", 41))}

    def run(emb: Embedder, name: str):
        emb.reset_state()
        return [a for part in parts[name] for a in emb.embed_stateful(part, batch_size=4)]

    expected = {name: run(Embedder(demo_model, device="cpu"), name) for name in parts}
    embedders = {name: Embedder(demo_model, device="cpu") for name in parts}
    got = overlapped({name: (lambda name=name: run(embedders[name], name)) for name in parts})
    for name in parts:
        assert max_diff(got[name], expected[name]) <= 1e-6, name


def test_stateful_calls_on_one_embedder_take_turns(demo_model, threads):
    """Calls of the stateful protocol on one embedder run whole, one after the other: the
    result is one of the two sequential orders, never a mix."""
    threads(1)
    first, second = sentences(51, 5), sentences(52, 5)

    def in_order(x, y):
        emb = Embedder(demo_model, device="cpu")
        return emb.embed_stateful(x, batch_size=5), emb.embed_stateful(y, batch_size=5)

    orders = [in_order(first, second), in_order(second, first)]
    for _ in range(3):
        emb = Embedder(demo_model, device="cpu")
        got = overlapped({"x": lambda: emb.embed_stateful(first, batch_size=5),
                          "y": lambda: emb.embed_stateful(second, batch_size=5)})
        x_first = max_diff(got["x"], orders[0][0]) + max_diff(got["y"], orders[0][1])
        y_first = max_diff(got["y"], orders[1][0]) + max_diff(got["x"], orders[1][1])
        assert min(x_first, y_first) <= 1e-6


def test_callers_of_both_directions_never_wait_on_each_other(threads):
    """Four direction tasks of two callers must be able to run at the same time: with one
    shared pair of threads two callers could each hold one and wait for the other for ever."""
    threads(2)
    everyone = threading.Barrier(4, timeout=20)

    def direction(d):
        everyone.wait()                     # returns only once all four tasks run at once
        return d

    def caller():
        # a new thread starts from torch's process-wide default, which another caller's
        # direction threads may have just lowered to their half: say the count here
        torch.set_num_threads(2)
        return both_directions(direction, torch.device("cpu"))

    got = overlapped({name: caller for name in ("a", "b")})
    assert got == {"a": [0, 1], "b": [0, 1]}


def test_many_callers_with_two_torch_threads_finish(demo_model, threads):
    """A deadlock check with a time-out: six threads, each embedding small batches (every one
    through the directions side by side)."""
    threads(2)
    emb = Embedder(demo_model, device="cpu", cache_size=0, token_budget=64)
    jobs = {f"j{k}": sentences(600 + k, 10, longest=8) for k in range(6)}
    got = overlapped({name: (lambda s=s: emb.embed(s)) for name, s in jobs.items()})
    alone = Embedder(demo_model, device="cpu", cache_size=0, token_budget=64)
    for name, s in jobs.items():
        assert max_diff(got[name], alone.embed(s)) <= 1e-6


def test_a_direction_pair_ends_with_its_caller(threads):
    """Each calling thread's pair of direction threads goes when the caller has ended."""
    threads(2)

    def pair_names():
        return {t.name for t in threading.enumerate() if t.name.startswith("bilm-direction-")}

    before = pair_names()
    caller = threading.Thread(target=lambda: both_directions(lambda d: d, torch.device("cpu")),
                              name="short-lived-caller")
    caller.start()
    caller.join(JOIN_S)
    import gc
    gc.collect()
    for _ in range(200):
        if not {n for n in pair_names() - before if "short-lived-caller" in n}:
            break
        threading.Event().wait(0.05)
    assert not {n for n in pair_names() - before if "short-lived-caller" in n}


def test_type_cache_under_eviction_pressure_from_several_threads(demo_model, threads):
    """The smallest type cache, many different words from three threads: the context-free
    vectors still match a fresh embedder's."""
    threads(1)
    emb = Embedder(demo_model, device="cpu", max_types=10_000, cache_size=0)
    words = vocabulary()
    chunks = {f"c{k}": words[k::3] * 4 for k in range(3)}
    got = overlapped({name: (lambda c=c: emb.token_vectors(c)) for name, c in chunks.items()})
    fresh = Embedder(demo_model, device="cpu")
    for name, c in chunks.items():
        np.testing.assert_array_equal(got[name], fresh.token_vectors(c))


def test_the_exclusive_side_waits_for_every_shared_holder():
    lock = SharedExclusiveLock()
    order: List[str] = []
    inside = threading.Barrier(3, timeout=10)
    release = threading.Event()

    def reader(name):
        with lock.shared():
            inside.wait()                    # both readers hold it together
            release.wait(10)
            order.append(name)

    def writer():
        inside.wait()
        with lock.exclusive():
            order.append("writer")

    workers = [threading.Thread(target=reader, args=("r1",)),
               threading.Thread(target=reader, args=("r2",)), threading.Thread(target=writer)]
    for w in workers:
        w.start()
    threading.Event().wait(0.2)
    release.set()
    for w in workers:
        w.join(10)
    assert order[-1] == "writer" and sorted(order[:2]) == ["r1", "r2"]


def test_file_modes_do_not_touch_the_process_umask(monkeypatch, tmp_path):
    """Another thread creating a file must never see a umask changed under it: the modes of
    new files are computed by reading the umask, not by setting it."""
    if not os.path.exists("/proc/self/status"):
        pytest.skip("reads the umask from /proc (Linux)")
    mask = os.umask(0o027)
    os.umask(mask)
    try:
        os.umask(0o027)

        def refuse(*_):
            raise AssertionError("os.umask was called while writing")

        monkeypatch.setattr(os, "umask", refuse)
        assert atomic.ordinary_mode() == 0o640 and atomic.ordinary_mode(folder=True) == 0o750
        from elmo_engine.io import figures

        fig, ax = figures.new_figure()
        ax.plot([0, 1], [1, 0])
        (path,) = figures.save(fig, tmp_path / "plot.png")
        assert (path.stat().st_mode & 0o777) == 0o640
    finally:
        monkeypatch.undo()
        os.umask(mask)


def test_a_long_lived_thread_adopts_the_configured_count(threads):
    """A thread that starts while a pass's direction threads have lowered torch's default gets
    the count :func:`runtime.configure` set once it adopts it (the app's lanes do)."""
    from elmo_engine import runtime

    before = runtime._threads
    try:
        runtime.configure(threads=2)
        lowered = threading.Thread(target=lambda: torch.set_num_threads(1))   # as a worker does
        lowered.start()
        lowered.join()
        seen = {}

        def lane():
            seen["start"] = torch.get_num_threads()
            runtime.adopt_thread_count()
            seen["adopted"] = torch.get_num_threads()

        t = threading.Thread(target=lane)
        t.start()
        t.join()
        assert seen == {"start": 1, "adopted": 2}
    finally:
        runtime._threads = before


def test_a_types_vector_does_not_depend_on_the_types_computed_beside_it(demo_model, threads):
    """The BLAS takes another kernel for 1-4 rows (its roundings differ by ~1e-7, ~1e-6 after
    the LSTMs): a word first met alone must get the bits it gets among many, or a result would
    depend on what another caller had cached first (found on a Zen 4 host)."""
    threads(1)
    words = vocabulary()[:300]
    together = Embedder(demo_model, device="cpu").token_vectors(words)
    for n in (1, 2, 3, 4, 5, 17):
        alone = Embedder(demo_model, device="cpu").token_vectors(words[:n])
        assert np.array_equal(alone, together[:n]), n


def _units(offered: bool):
    """A stand-in for ``runtime.cpu_bf16``: a CPU with bf16 units or without."""
    from elmo_engine import runtime

    cpu = runtime.CpuBf16("AVX512_BF16" if offered else None, "test CPU", "AVX512", ())
    return lambda: cpu


def test_embedders_over_one_model_share_its_lock_and_follow_a_move(threads, monkeypatch):
    """The app's corpus build makes its own embedder over the workspace's model. A move of the
    model by one of them (the GPU out-of-memory fall-back, here to the CPU of a host without
    bf16 units: float32) waits for the other's pass in flight, which ends on the model as it
    was; the other's next pass follows the move (its device, dtype, precision and cached type
    vectors) and gives what the mover gives. Before, each embedder had its own lock,
    the move ran under the other's pass, and the other kept running bf16 inputs into a float32
    model ("could not create a primitive descriptor")."""
    from elmo_engine import runtime
    from elmo_engine.sharing import model_lock

    threads(1)
    monkeypatch.setattr(runtime, "cpu_bf16", _units(True))
    model = load_checkpoint(DEMO)
    mover = Embedder(model, device="cpu", precision="bf16", cache_size=0)
    warned: List[str] = []
    other = Embedder(model, device="cpu", precision="bf16", cache_size=100,
                     on_warning=warned.append)
    assert mover._model_lock is other._model_lock is model_lock(model)
    held_sents, later = sentences(61, 3), sentences(62, 3)
    in_bf16 = Embedder(load_checkpoint(DEMO), device="cpu", precision="bf16", cache_size=0)
    expected_held = in_bf16.embed(held_sents)
    mover.embed(held_sents)                      # the same types cached in both, in bf16

    contextual = type(model).contextual
    in_pass, release = threading.Event(), threading.Event()

    def holding(self, *args, **kwargs):
        if threading.current_thread().name == "held-pass":
            in_pass.set()
            assert release.wait(JOIN_S)
        return contextual(self, *args, **kwargs)

    monkeypatch.setattr(type(model), "contextual", holding)
    got: Dict[str, object] = {}
    held = threading.Thread(target=lambda: got.update(held=other.embed(held_sents)),
                            name="held-pass", daemon=True)
    held.start()
    assert in_pass.wait(JOIN_S)
    monkeypatch.setattr(runtime, "cpu_bf16", _units(False))   # the CPU it falls back to
    move = threading.Thread(target=lambda: mover._move(torch.device("cpu")), daemon=True)
    move.start()
    lock = model_lock(model)
    deadline = time.monotonic() + JOIN_S
    while lock._waiting != 1 and time.monotonic() < deadline:   # the move asks for the lock
        time.sleep(0.005)
    assert lock._waiting == 1 and lock._shared == 1                # ... and waits for the pass
    assert move.is_alive() and next(model.parameters()).dtype == torch.bfloat16
    release.set()
    held.join(JOIN_S)
    move.join(JOIN_S)
    assert not held.is_alive() and not move.is_alive()
    assert max_diff(got["held"], expected_held) == 0.0           # the pass ran on bf16 whole
    assert next(model.parameters()).dtype == torch.float32 and mover.precision == "fp32"
    assert other.precision == "bf16"                              # until its next pass
    followed = other.embed(later)
    assert other.precision == "fp32" and other.dtype == torch.float32
    assert all(v.dtype == torch.float32 for v in other._types.values())
    assert any("following it" in w for w in warned)               # said, as a move is
    # the sentences it had kept were bf16's: a new precision starts a new sentence cache
    assert max_diff(other.embed(held_sents), mover.embed(held_sents)) <= 1e-6
    assert max_diff(followed, mover.embed(later)) <= 1e-6
    assert max_diff(followed, in_bf16.embed(later)) > 1e-4       # float32 now, not bf16


def test_the_step_by_step_lstm_holds_the_models_lock(demo_model, monkeypatch):
    """``lstm_inspect.inspect`` (the Units view's captures and interventions) runs the model
    outside any embedder: it holds the model's lock shared, so a move waits for it."""
    import elmo_engine.model.lstm_inspect as li
    from elmo_engine.sharing import model_lock

    lock = model_lock(demo_model)
    seen = []
    run = li._inspect
    monkeypatch.setattr(li, "_inspect", lambda *a: (seen.append(lock._shared), run(*a))[1])
    emb = Embedder(demo_model, device="cpu", cache_size=0)
    tok = torch.from_numpy(emb.token_vectors(["<S>", "the", "bank", "</S>"]))[None]
    res = li.inspect(demo_model, tok, torch.tensor([4]))
    assert seen == [1] and lock._shared == 0
    assert res.outputs()[-1].shape == (1, 4, 2 * demo_model.opts.output_dim)
