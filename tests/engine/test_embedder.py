"""Embedder: caches, limits, progress, cancel, odd input."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from elmo_engine.model.checkpoint import load_checkpoint
from elmo_engine.embed.embedder import MAX_SENTENCE_TOKENS, Embedder
from elmo_engine.errors import CancelledError, InputError
from elmo_engine.progress import TaskState

from support import FIXTURES


@pytest.fixture(scope="module")
def model():
    return load_checkpoint(FIXTURES / "allennlp")


def test_sentence_cache_hits_and_identity(model):
    emb = Embedder(model)
    a = emb.embed([["a", "b"], ["c"]])
    misses = emb.stats["sentence_misses"]
    b = emb.embed([["c"], ["a", "b"], ["a", "b"]])
    assert emb.stats["sentence_misses"] == misses
    assert b[1] is a[0] and b[2] is a[0] and b[0] is a[1]
    assert not a[0].flags.writeable


def test_type_cache_computes_each_type_once(model):
    emb = Embedder(model)
    emb.embed([["x", "y", "x"], ["y", "z"]])
    assert emb.stats["types_computed"] == 5        # x y z <S> </S>
    vec = emb.token_vectors(["y"])
    assert vec.shape == (1, 16)


def test_disk_cache_roundtrip_and_recovery(model, tmp_path):
    first = Embedder(model, cache_dir=tmp_path).embed([["hello", "world"]])[0]
    files = list(tmp_path.rglob("*.npy"))
    assert len(files) == 1
    second_emb = Embedder(model, cache_dir=tmp_path)
    second = second_emb.embed([["hello", "world"]])[0]
    np.testing.assert_array_equal(first, second)
    assert second_emb.stats["sentence_misses"] == 0
    files[0].write_bytes(b"\x93NUMPY garbage")        # a damaged entry is recomputed
    third_emb = Embedder(model, cache_dir=tmp_path)
    third = third_emb.embed([["hello", "world"]])[0]
    np.testing.assert_array_equal(first, third)
    assert third_emb.stats["sentence_misses"] == 1
    assert np.load(files[0], allow_pickle=False).shape == (3, 2, 32)


def test_empty_sentence_and_odd_unicode(model):
    emb = Embedder(model)
    out = emb.embed([[], ["😀", "e\u0301", "שלום", "\u202e", "a\ud800"], ["x" * 5000]])
    assert out[0].shape == (3, 0, 32)
    assert out[1].shape == (3, 5, 32) and np.isfinite(out[1]).all()
    assert out[2].shape == (3, 1, 32)


def test_bad_input_is_an_input_error(model):
    emb = Embedder(model)
    with pytest.raises(InputError, match="string"):
        emb.embed(["not tokenized"])
    with pytest.raises(InputError, match="whitespace"):
        emb.embed([["a b"]])
    with pytest.raises(InputError, match="limit"):
        emb.embed([["a"] * (MAX_SENTENCE_TOKENS + 1)])


def test_long_sentence_runs(model):
    out = Embedder(model).embed([["w%d" % (i % 50) for i in range(5000)]])[0]
    assert out.shape == (3, 5000, 32) and np.isfinite(out).all()


def test_progress_and_cancel(model):
    seen = []
    state = TaskState(lambda d, t, m: seen.append((d, t)))
    emb = Embedder(model, token_budget=40)
    sents = [["w%d" % i, "and", "more"] for i in range(50)]
    emb.embed(sents, state=state)
    assert seen[0] == (0, 150) and seen[-1] == (150, 150)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)

    calls = []

    def cancel_after_two(d, t, m):
        calls.append(d)
        if len(calls) == 3:
            state2.cancel()

    state2 = TaskState(cancel_after_two)
    with pytest.raises(CancelledError):
        Embedder(model, token_budget=40).embed(sents, state=state2)
    assert len(calls) == 3


def test_half_precision_refused_on_cpu(model):
    with pytest.raises(InputError, match="GPU"):
        Embedder(model, device="cpu", precision="fp16")


def test_type_cache_is_bounded_and_exact(model):
    emb = Embedder(model, max_types=10_000)
    words = [f"w{i}" for i in range(12_000)]
    first = emb.token_vectors(words[:5])
    emb.embed([words[i:i + 40] for i in range(0, 12_000, 40)])
    assert len(emb._types) <= 10_000
    np.testing.assert_array_equal(emb.token_vectors(words[:5]), first)   # recomputed, same


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_a_stateful_batch_runs_its_rows_in_groups_within_the_token_budget(tiny_checkpoint,
                                                                          precision):
    """One long line no longer pads every row of its stateful batch to its length: the rows
    (each with its own state slot) run longest first in groups of at most ``token_budget``
    padded tokens, with the vectors and the carried state of the batch run whole. In bf16 the
    slots keep the cell float32, as the pass does (a review found the grouped batch's state
    put back in the slots' bf16 type failing)."""
    from elmo_engine import runtime

    if precision == "bf16" and not runtime.cpu_bf16().offered:
        pytest.skip("this CPU has no bf16 units")
    tol = 1e-5 if precision == "fp32" else 2e-2
    model = load_checkpoint(tiny_checkpoint)
    words = "the bank of a river rose by the old mill where money was kept".split()
    first = [words[i % 7:i % 7 + 2 + i % 5] for i in range(12)]
    first[5] = (words * 40)[:400]                        # the long line
    second = [words[i % 5:i % 5 + 3 + i % 4] for i in range(12)]
    whole = Embedder(model, device="cpu", cache_size=0, token_budget=100_000,
                     precision=precision)
    grouped = Embedder(model, device="cpu", cache_size=0, token_budget=402, precision=precision)
    shapes = []
    run = grouped._stateful_rows

    def spy(batch, init, fell_back=False):
        shapes.append((len(batch), max(len(s) for s in batch) + 2))
        return run(batch, init, fell_back)

    grouped._stateful_rows = spy
    for emb in (whole, grouped):
        emb.reset_state()
    for part in (first, second):                         # the second batch reads the carried state
        a, b = whole.embed_stateful(part, batch_size=12), grouped.embed_stateful(part, batch_size=12)
        assert len(a) == len(b) == 12
        for x, y in zip(a, b):
            np.testing.assert_allclose(x, y, atol=tol, rtol=0)
    assert [c.dtype for c, _ in grouped._slots] == [torch.float32] * len(grouped._slots)
    assert all(rows * width <= 402 for rows, width in shapes)
    assert shapes[0] == (1, 402) and len(shapes) >= 3    # the long line alone, then the rest
