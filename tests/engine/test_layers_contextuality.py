"""Contextuality measures (Ethayarajh 2019) against hand-computed cases and a plain reference."""
from __future__ import annotations

import math

import numpy as np
import pytest

from elmo_engine.analysis.layers.contextuality import ContextualityAccumulator, contextuality
from elmo_engine.analysis.layers.spectra import mev_of_stack, top_eigenvalues
from elmo_engine.errors import CancelledError, InputError
from elmo_engine.progress import TaskState


@pytest.fixture(autouse=True, scope="module")
def _one_blas_thread():
    """One BLAS thread: on a busy 2-core machine a second one only spins."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        yield

R2, R5, R10, R13 = math.sqrt(2), math.sqrt(5), math.sqrt(10), math.sqrt(13)

# Three sentences; "a" occurs once in each (the only word with >= 3 occurrences).
# Layer 1 vectors are [forward | backward], 2 + 2 dimensions; layer 0 is [tok, tok].
HAND_TOKENS = [["a", "b"], ["a", "b"], ["a", "c"]]
HAND_L1 = [[[1, 0, 1, 0], [0, 1, 0, 1]],
           [[1, 1, -1, 0], [1, -1, 0, 1]],
           [[0, 2, 0, 1], [-1, 0, 1, 1]]]
TYPE_VEC = {"a": [1.0, 2.0], "b": [3.0, 1.0], "c": [0.0, 1.0]}


def hand_activations():
    out = []
    for toks, l1 in zip(HAND_TOKENS, HAND_L1):
        l0 = [TYPE_VEC[t] * 2 for t in toks]
        out.append(np.array([l0, l1], np.float32))                    # (2, n, 4)
    return out


def test_hand_computed_forward_and_backward():
    res = contextuality(hand_activations(), HAND_TOKENS, min_count=3, baseline_samples=1000)
    assert res.words == ["a"] and list(res.counts) == [3]
    f, b = res.row(1, "forward"), res.row(1, "backward")
    # forward halves of "a": (1,0), (1,1), (0,2): cosines 1/√2, 0, 1/√2
    assert f.self_similarity.value == pytest.approx(R2 / 3, abs=1e-6)
    # XᵀX = [[2, 1], [1, 5]]: eigenvalues (7 ± √13)/2, trace 7
    assert f.max_explainable_variance.value == pytest.approx((7 + R13) / 14, abs=1e-6)
    # sentences: 1/√2, 1/√2, (2/√5 + 1/√5)/2
    assert f.intra_sentence_similarity.value == pytest.approx((R2 + 3 / (2 * R5)) / 3, abs=1e-6)
    # cross-sentence pairs of unit vectors sum to 0 over the 12 pairs
    assert f.self_similarity.baseline == pytest.approx(0.0, abs=1e-6)
    assert f.intra_sentence_similarity.baseline == f.self_similarity.baseline
    # all six forward vectors: XᵀX = [[4, 0], [0, 7]]
    assert f.max_explainable_variance.baseline == pytest.approx(7 / 11, abs=1e-6)
    # backward halves of "a": (1,0), (-1,0), (0,1): cosines -1, 0, 0; XᵀX = diag(2, 1)
    assert b.self_similarity.value == pytest.approx(-1 / 3, abs=1e-6)
    assert b.max_explainable_variance.value == pytest.approx(2 / 3, abs=1e-6)
    assert b.intra_sentence_similarity.value == pytest.approx(
        (R2 + (2 / R5 + 3 / R10) / 2) / 3, abs=1e-6)
    assert b.self_similarity.baseline == pytest.approx((2 + R2) / 12, abs=1e-6)
    assert b.max_explainable_variance.baseline == pytest.approx((7 + R5) / 14, abs=1e-6)
    for m in (b.self_similarity, b.intra_sentence_similarity, b.max_explainable_variance):
        assert m.adjusted == pytest.approx(m.value - m.baseline, abs=1e-12)


def test_hand_computed_centred_mev_and_token_layer():
    res = contextuality(hand_activations(), HAND_TOKENS, min_count=3, centre_mev=True)
    # forward, centred: covariance [[2/3, -1], [-1, 2]] → eigenvalues (4 ± √13)/3
    assert res.row(1, "forward").max_explainable_variance.value == pytest.approx(
        (4 + R13) / 8, abs=1e-6)
    # backward, centred: diag(2, 2/3) → 3/4
    assert res.row(1, "backward").max_explainable_variance.value == pytest.approx(0.75, abs=1e-6)
    # layer 0 is context-free: one row ("both"), identical occurrences → self-similarity 1
    assert [r.direction for r in res.rows if r.layer == 0] == ["both"]
    l0 = res.row(0)
    assert l0.self_similarity.value == pytest.approx(1.0, abs=1e-6)
    assert math.isnan(l0.max_explainable_variance.value)          # no variance left to explain
    unc = contextuality(hand_activations(), HAND_TOKENS, min_count=3)
    assert unc.row(0).max_explainable_variance.value == pytest.approx(1.0, abs=1e-6)


def plain_reference(acts, tokens, direction, layer, min_count, centre=False):
    """The definitions computed the long way: every pair, every SVD."""
    d = acts[0].shape[2]
    sl = {"both": slice(0, d), "forward": slice(0, d // 2), "backward": slice(d // 2, d)}[direction]
    occ = {}
    for si, s in enumerate(tokens):
        for ti, t in enumerate(s):
            occ.setdefault(t, []).append(acts[si][layer, ti, sl].astype(np.float64))

    def cos(u, v):
        return float(u @ v / np.linalg.norm(u) / np.linalg.norm(v))
    ss, mev = [], []
    for vs in occ.values():
        n = len(vs)
        if n < min_count:
            continue
        ss.append(np.mean([cos(vs[i], vs[j]) for i in range(n) for j in range(n) if i != j]))
        x = np.array(vs)
        if centre:
            x = x - x.mean(axis=0)
        sv = np.linalg.svd(x, compute_uv=False)
        mev.append(sv[0] ** 2 / np.sum(sv ** 2))
    intra = []
    for si, s in enumerate(tokens):
        if len(s) >= 2:
            v = acts[si][layer][:, sl].astype(np.float64)
            intra.append(np.mean([cos(v.mean(axis=0), row) for row in v]))
    flat = np.array([acts[si][layer, ti, sl] for si, s in enumerate(tokens)
                     for ti in range(len(s))], np.float64)
    sent = np.array([si for si, s in enumerate(tokens) for _ in s])
    unit = flat / np.linalg.norm(flat, axis=1, keepdims=True)
    cosines = unit @ unit.T                                       # every pair of tokens
    return np.mean(ss), np.mean(intra), np.mean(mev), cosines[sent[:, None] != sent].mean()


@pytest.mark.parametrize("centre", [False, True])
def test_against_plain_reference_with_frequent_words(centre):
    rng = np.random.default_rng(3)
    vocab = [f"w{i}" for i in range(25)]
    tokens = [[vocab[j] for j in rng.integers(0, 25, rng.integers(1, 9))] for _ in range(90)]
    d = 8                                 # words with > 8 occurrences take the D x D Gram path
    acts = [(rng.normal(size=(3, len(s), d)) + 0.4).astype(np.float32) for s in tokens]
    res = contextuality(acts, tokens, centre_mev=centre)
    assert res.counts.max() > d and res.counts.min() >= 5
    for row in res.rows:
        ss, intra, mev, base = plain_reference(acts, tokens, row.direction, row.layer, 5, centre)
        assert row.self_similarity.value == pytest.approx(ss, abs=1e-6)
        assert row.intra_sentence_similarity.value == pytest.approx(intra, abs=1e-6)
        assert row.max_explainable_variance.value == pytest.approx(mev, abs=1e-6)
        assert row.self_similarity.baseline == pytest.approx(base, abs=1e-6)


def test_min_count_rule_and_word_table():
    tokens = [["x", "y"]] * 4 + [["y", "z"]] + [["q"]]
    acts = [np.random.default_rng(i).normal(size=(2, len(s), 4)).astype(np.float32)
            for i, s in enumerate(tokens)]
    res = contextuality(acts, tokens)
    assert res.words == ["y"] and list(res.counts) == [5]          # "x" has only 4
    assert res.row(1).n_sentences == 5                           # the one-token sentence is out
    table = res.word_table(1, "forward")
    assert table[0][:2] == ("y", 5)
    assert table[0][2] == pytest.approx(res.row(1, "forward").self_similarity.value)


def test_streaming_in_any_chunks_gives_the_same_result():
    rng = np.random.default_rng(5)
    tokens = [[f"w{j}" for j in rng.integers(0, 6, rng.integers(2, 7))] for _ in range(40)]
    acts = [rng.normal(size=(2, len(s), 6)).astype(np.float32) for s in tokens]
    whole = contextuality(acts, tokens, seed=2)
    acc = ContextualityAccumulator(tokens, 2, 6, seed=2)
    for a, b in ((0, 7), (7, 8), (8, 40)):
        acc.add(acts[a:b])
    parts = acc.result()
    for r1, r2 in zip(whole.rows, parts.rows):
        for m in ("self_similarity", "intra_sentence_similarity", "max_explainable_variance"):
            assert getattr(r1, m).value == pytest.approx(getattr(r2, m).value, abs=1e-6)
            assert getattr(r1, m).baseline == pytest.approx(getattr(r2, m).baseline, abs=1e-6)


def test_zero_vectors_count_as_cosine_zero():
    tokens = [["a"], ["a"], ["a"]]
    acts = [np.array([[[1, 0]], [[v, 0]]], np.float32) for v in (1.0, 0.0, 2.0)]
    res = contextuality(acts, tokens, min_count=3)
    # layer 1: cosines 0 (with the zero vector), 0, 1 → mean over 6 ordered pairs = 1/3
    assert res.row(1).self_similarity.value == pytest.approx(1 / 3, abs=1e-6)


def test_max_occurrences_caps_each_word():
    tokens = [["a", "b"]] * 30
    acts = [np.random.default_rng(i).normal(size=(2, 2, 4)).astype(np.float32) for i in range(30)]
    res = contextuality(acts, tokens, max_occurrences=10)
    assert list(res.counts) == [10, 10]
    assert res.settings["max_occurrences"] == 10


def test_progress_and_cancel():
    tokens = [["a", "b", "c"]] * 600
    acts = [np.ones((2, 3, 4), np.float32)] * 600
    seen = []
    state = TaskState(lambda d, t, m: seen.append((d, t, m)))
    contextuality(acts, tokens, state=state)
    assert (600, 600) in [(d, t) for d, t, _ in seen]
    state = TaskState(lambda d, t, m: state.cancel())
    with pytest.raises(CancelledError):
        contextuality(acts, tokens, state=state)


def test_bad_input_is_an_input_error():
    acts = [np.zeros((2, 3, 4), np.float32)]
    with pytest.raises(InputError, match="2 tokens but 3 vectors"):
        contextuality(acts, [["a", "b"]])
    with pytest.raises(InputError, match="min_count"):
        contextuality(acts, [["a", "b", "c"]], min_count=1)
    with pytest.raises(InputError, match="no forward and backward halves"):
        contextuality([np.zeros((2, 3, 5), np.float32)], [["a", "b", "c"]])
    with pytest.raises(InputError, match="has no tokens"):
        ContextualityAccumulator([["a"], []], 2, 4)


@pytest.mark.parametrize("shift", [0.0, 3.0])
def test_spectra_power_iteration_matches_lapack(shift):
    rng = np.random.default_rng(7)
    x = rng.normal(size=(4, 90, 70)) + shift      # larger than the exact-eigen threshold
    sv = np.linalg.svd(x, compute_uv=False)
    np.testing.assert_allclose(mev_of_stack(x), sv[:, 0] ** 2 / np.sum(sv ** 2, axis=1),
                               rtol=1e-8)
    g = np.matmul(x.transpose(0, 2, 1), x)
    np.testing.assert_allclose(top_eigenvalues(g), np.linalg.eigvalsh(g)[:, -1], rtol=1e-8)
