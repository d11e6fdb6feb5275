"""Cross-context comparison (elmo_engine.analysis.contexts.compare) against plain NumPy
references."""
from __future__ import annotations

import csv
import math

import numpy as np
import pytest

from elmo_engine.analysis.contexts import compare as cmp
from elmo_engine.io import projector_tsv
from elmo_engine.errors import InputError


def naive_cos(a, b):
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def random_acts(seed=0, sizes=(5, 7, 4), layers=3, p=6):
    rng = np.random.default_rng(seed)
    acts = []
    for n in sizes:
        tok = rng.normal(size=(n, p)).astype(np.float32)
        ctx = rng.normal(size=(layers - 1, n, 2 * p)).astype(np.float32)
        acts.append(np.concatenate([np.concatenate([tok, tok], -1)[None], ctx]))  # (L+1, n, 2P)
    return acts


def test_find_occurrences_and_gather():
    toks = [["the", "bank", "of", "the", "river"], ["Bank", "rates"], ["a", "bank"]]
    assert cmp.find_occurrences(toks, "bank") == [(0, 1), (2, 1)]
    assert cmp.find_occurrences(toks, "bank", ignore_case=True) == [(0, 1), (1, 0), (2, 1)]
    acts = random_acts(sizes=(5, 2, 2))
    v = cmp.gather(acts, [(0, 1), (2, 1)])
    assert v.shape == (3, 2, 12)
    np.testing.assert_array_equal(v[:, 1], acts[2][:, 1])
    with pytest.raises(InputError, match="sentence 1 has no token 5"):
        cmp.gather(acts, [(1, 5)])
    with pytest.raises(InputError, match="no occurrences"):
        cmp.gather(acts, [])


def test_cosine_matrix_matches_naive_and_centering():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(5, 8))
    c = rng.normal(size=8)
    sim = cmp.cosine_matrix(x)
    simc = cmp.cosine_matrix(x, c)
    for i in range(5):
        for j in range(5):
            assert sim[i, j] == pytest.approx(naive_cos(x[i], x[j]), abs=1e-12)
            assert simc[i, j] == pytest.approx(naive_cos(x[i] - c, x[j] - c), abs=1e-12)
    z = cmp.cosine_matrix(np.array([[1.0, 0], [0, 0]]))
    np.testing.assert_array_equal(z, [[1, 0], [0, 0]])


def test_self_similarity_excludes_diagonal():
    sim = np.array([[1.0, 0.2, 0.4], [0.2, 1.0, 0.6], [0.4, 0.6, 1.0]])
    assert cmp.self_similarity(sim) == pytest.approx((0.2 + 0.4 + 0.6) / 3)
    assert math.isnan(cmp.self_similarity(np.ones((1, 1))))


def test_group_similarity_numbers():
    sim = np.array([[1.0, 0.9, 0.1, 0.2],
                    [0.9, 1.0, 0.3, 0.4],
                    [0.1, 0.3, 1.0, 0.8],
                    [0.2, 0.4, 0.8, 1.0]])
    w, b = cmp.group_similarity(sim, ["river", "river", "money", "money"])
    assert w == pytest.approx((0.9 + 0.8) / 2)
    assert b == pytest.approx((0.1 + 0.2 + 0.3 + 0.4) / 4)
    # an unlabelled occurrence takes no part
    w2, b2 = cmp.group_similarity(sim, ["river", "", "money", "money"])
    assert w2 == pytest.approx(0.8)
    assert b2 == pytest.approx((0.1 + 0.2) / 2)
    assert all(math.isnan(v) for v in cmp.group_similarity(sim, ["", "", "", "x"]))


def test_weights_and_mix():
    np.testing.assert_allclose(cmp.normalise_weights([1, 1, 2], 3), [0.25, 0.25, 0.5])
    np.testing.assert_allclose(cmp.normalise_weights(None, 3), [1 / 3] * 3)
    np.testing.assert_allclose(cmp.normalise_weights([0, 0, 0], 3), [1 / 3] * 3)
    with pytest.raises(InputError):
        cmp.normalise_weights([1, 2], 3)
    with pytest.raises(InputError):
        cmp.normalise_weights([1, -1, 2], 3)
    stack = np.arange(24, dtype=np.float32).reshape(3, 2, 4)
    np.testing.assert_allclose(cmp.mix_layers(stack, [0.2, 0.3, 0.5]),
                               0.2 * stack[0] + 0.3 * stack[1] + 0.5 * stack[2], rtol=1e-6)
    from elmo_engine.model.mix import scalar_mix_numpy
    np.testing.assert_allclose(cmp.mix_layers(stack, [0.2, 0.3, 0.5]),
                               scalar_mix_numpy(stack, np.log([0.2, 0.3, 0.5])), rtol=1e-6)


def test_compare_against_numpy_reference():
    acts = random_acts(seed=3)
    occ = [(0, 0), (1, 3), (2, 2), (1, 6)]
    vec = cmp.gather(acts, occ)                                   # (3, 4, 12)
    w = [0.1, 0.3, 0.6]
    comp = cmp.compare(vec, w, "both", groups=["a", "a", "b", "b"], word="x", occurrences=occ)
    assert comp.names == ("layer 0", "layer 1", "layer 2", "mix")
    assert comp.matrices.shape == (4, 4, 4)
    mix = 0.1 * vec[0] + 0.3 * vec[1] + 0.6 * vec[2]
    for k, layer in enumerate([vec[0], vec[1], vec[2], mix]):
        for i in range(4):
            for j in range(4):
                assert comp.matrices[k, i, j] == pytest.approx(naive_cos(layer[i], layer[j]),
                                                               abs=1e-6)
        m = comp.matrices[k]
        assert comp.self_sim[k] == pytest.approx(
            np.mean([m[i, j] for i in range(4) for j in range(4) if i != j]))
        assert comp.within[k] == pytest.approx((m[0, 1] + m[2, 3]) / 2)
        assert comp.between[k] == pytest.approx(np.mean([m[0, 2], m[0, 3], m[1, 2], m[1, 3]]))
    fwd = cmp.compare(vec, w, "forward")
    bwd = cmp.compare(vec, w, "backward")
    assert fwd.matrices[1, 0, 1] == pytest.approx(naive_cos(vec[1, 0, :6], vec[1, 1, :6]), abs=1e-6)
    assert bwd.matrices[1, 0, 1] == pytest.approx(naive_cos(vec[1, 0, 6:], vec[1, 1, 6:]), abs=1e-6)
    # layer 0 halves are identical, so every direction gives the same layer-0 matrix
    np.testing.assert_allclose(fwd.matrices[0], comp.matrices[0], atol=1e-7)
    np.testing.assert_allclose(bwd.matrices[0], comp.matrices[0], atol=1e-7)


def test_anisotropy_correction_subtracts_reference_mean():
    rng = np.random.default_rng(5)
    # a common offset makes every raw cosine high (anisotropy)
    acts = [(rng.normal(size=(3, 30, 8)) + 4.0).astype(np.float32) for _ in range(3)]
    occ = [(0, 1), (1, 2), (2, 3), (0, 9)]
    vec = cmp.gather(acts, occ)
    mean = cmp.reference_mean(acts)
    np.testing.assert_allclose(mean, np.concatenate(acts, axis=1).mean(axis=1), rtol=1e-6)
    raw = cmp.compare(vec, None)
    cor = cmp.compare(vec, None, center=mean)
    assert cor.corrected and not raw.corrected
    assert raw.self_sim[1] > 0.8
    assert abs(cor.self_sim[1]) < 0.5
    assert cor.matrices[2, 0, 3] == pytest.approx(naive_cos(vec[2, 0] - mean[2], vec[2, 3] - mean[2]),
                                                  abs=1e-6)
    wmix = np.full(3, 1 / 3)
    mixmean = (wmix[:, None] * mean).sum(0)
    mixvec = (wmix[:, None, None] * vec).sum(0)
    assert cor.matrices[3, 1, 2] == pytest.approx(
        naive_cos(mixvec[1] - mixmean, mixvec[2] - mixmean), abs=1e-5)
    with pytest.raises(InputError):
        cmp.compare(vec, None, center=mean[:, :4])


def test_snippet():
    toks = "we sat on the bank of the river today".split()
    assert cmp.snippet(toks, 4) == "…on the [bank] of the…"
    assert cmp.snippet(["bank"], 0) == "[bank]"
    # issue 39: a long context is dropped from its far ends, the [word] mark is never cut
    long = ["extraordinarily", "circumstantial", "the", "bank", "notwithstanding", "x"]
    got = cmp.snippet(long, 3, context=3, max_chars=20)
    assert got == "…[bank]…"                      # both sides as long as they fit, in turn
    assert cmp.snippet(long, 3, context=3, max_chars=30) == "…the [bank] notwithstanding x"
    assert cmp.snippet(["a"] * 3 + ["riverbank"], 3, max_chars=5) == "…[riverbank]"


def test_kwic_line_is_bounded_and_centred_on_the_word():
    """Issue 39: `contexts --reference` printed whole paragraphs; senses cut the [word] mark."""
    from elmo_engine.index.search import kwic_line

    para = ("word " * 300).split() + ["bank"] + ("more " * 300).split()
    line = kwic_line(para, 300, width=40)
    assert len(line) <= 2 * 40 + len("bank") + 4 and line.index("[bank]") == 41
    assert line.startswith("…") and line.endswith("…")
    short = kwic_line(["the", "bank"], 1, width=10)
    assert short == "       the [bank]"


def test_exports_round_trip(tmp_path):
    acts = random_acts(seed=7)
    occ = [(0, 0), (1, 1), (2, 3)]
    vec = cmp.gather(acts, occ)
    comp = cmp.compare(vec, None, labels=["a, b", "c", "d"], occurrences=occ)
    cmp.write_matrices_csv(tmp_path / "m.csv", comp)
    back = cmp.read_matrices_csv(tmp_path / "m.csv")
    assert list(back) == list(comp.names)
    for name, mat in zip(comp.names, comp.matrices):
        np.testing.assert_allclose(back[name], mat, atol=1e-6)
    cmp.write_vectors_npz(tmp_path / "v.npz", vec, occ, ["w"] * 3, ["s0", "s1", "s2"], ["g", "", "h"])
    with np.load(tmp_path / "v.npz", allow_pickle=False) as z:
        np.testing.assert_array_equal(z["vectors"], vec)
        np.testing.assert_array_equal(z["sentence"], [0, 1, 2])
        np.testing.assert_array_equal(z["token"], [0, 1, 3])
        assert list(z["group"]) == ["g", "", "h"]
    projector_tsv.write_vectors(tmp_path / "v.tsv", vec[2])
    np.testing.assert_allclose(np.loadtxt(tmp_path / "v.tsv", delimiter="\t"), vec[2], rtol=1e-6)
    projector_tsv.write_metadata(tmp_path / "m.tsv", ["sentence", "token", "word"],
                                 [[0, 0, "w\tx"], [1, 1, "w"], [2, 3, "w"]])
    with open(tmp_path / "m.tsv", encoding="utf-8") as fh:
        rows = list(csv.reader(fh, delimiter="\t"))
    assert rows[0] == ["sentence", "token", "word"] and rows[1] == ["0", "0", "w x"]
    assert len(rows) == 4
    assert not list(tmp_path.glob(".*part"))
