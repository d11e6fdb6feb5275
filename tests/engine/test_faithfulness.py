"""Map faithfulness (trustworthiness, continuity, kNN kept) and hubness per layer (issue 42)."""
from __future__ import annotations

import numpy as np
import pytest

from elmo_engine.analysis.layers import hubness as H
from elmo_engine.analysis.projection import faithfulness as F
from elmo_engine.errors import InputError


def _data(n=240, d=30, seed=3):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    return x, x[:, :2] + 0.4 * rng.normal(size=(n, 2))


# ---- trustworthiness and continuity ---------------------------------------------------------
@pytest.mark.parametrize("metric", ["euclidean", "cosine"])
@pytest.mark.parametrize("k", [1, 5, 12])
def test_trustworthiness_equals_scikit_learn(metric, k):
    from sklearn.manifold import trustworthiness

    x, y = _data()
    assert F.trustworthiness(x, y, k, metric) == pytest.approx(
        trustworthiness(x, y, n_neighbors=k, metric=metric), abs=1e-12)


def test_trustworthiness_of_a_pca_map_equals_scikit_learn():
    """The issue's criterion: T of a PCA map (the view's own PCA) equals scikit-learn's."""
    from sklearn.manifold import trustworthiness

    from elmo_engine.analysis.projection import pca

    x, _ = _data(300, 40, seed=7)
    y = pca(x.astype(np.float32), 2).coords.astype(np.float64)
    ours = F.trustworthiness(x, y, 10, "cosine")
    assert ours == pytest.approx(trustworthiness(x, y, n_neighbors=10, metric="cosine"),
                                 abs=1e-12)
    assert 0.5 < ours < 1.0


@pytest.mark.parametrize("k", [2, 7])
def test_continuity_is_trustworthiness_with_the_roles_swapped(k):
    from sklearn.manifold import trustworthiness

    x, y = _data(150, 8, seed=11)
    assert F.continuity(x, y, k) == pytest.approx(trustworthiness(y, x, n_neighbors=k),
                                                  abs=1e-12)


def test_trustworthiness_by_hand():
    """Five points on a line, 0 1 2 3 4, mapped with the two ends swapped (point 0 drawn at
    4, point 4 at 0); k = 1 (n = 5, k < n / 2); ties are broken by index.

    Nearest neighbour in the vectors: 0→1, 1→0, 2→1, 3→2, 4→3. On the map: 0→3, 1→2 (2 and
    4 tie), 2→1 (1 and 3 tie), 3→0 (0 and 2 tie), 4→1. Invented on the map, with their rank
    in the vectors: 0→3 (rank 3), 1→2 (rank 2: 0 ties and comes first), 3→0 (rank 4: 2 and
    4 at 1, then 1, then 0), 4→1 (rank 3). Σ (r − k) = 2 + 1 + 3 + 2 = 8, so
    T = 1 − 8 · 2 / (n k (2n − 3k − 1)) = 1 − 16 / 30."""
    x = np.arange(5, dtype=np.float64)[:, None]
    y = np.column_stack([[4.0, 1, 2, 3, 0], np.zeros(5)])
    assert F.trustworthiness(x, y, 1) == pytest.approx(1 - 16 / 30, abs=1e-12)
    # a map that keeps every neighbourhood: T = C = 1, every neighbour kept
    f = F.faithfulness(x, np.column_stack([3 * x[:, 0], np.zeros(5)]), k=1, metric="euclidean")
    assert (f.trustworthiness, f.continuity, f.knn_kept) == (1.0, 1.0, 1.0)


def test_faithfulness_per_point_and_sample():
    x, y = _data(400, 12, seed=5)
    full = F.faithfulness(x, y, k=10, metric="euclidean")
    assert full.n == full.n_total == 400 and full.seed is None
    assert full.per_point.shape == (400,) and full.knn_kept == pytest.approx(
        float(full.per_point.mean()))
    # per point: |N_k(x) ∩ N_k(y)| / k, checked for one point by brute force
    i = 17
    dx = np.linalg.norm(x - x[i], axis=1)
    dy = np.linalg.norm(y - y[i], axis=1)
    dx[i] = dy[i] = np.inf
    both = set(np.argsort(dx, kind="stable")[:10]) & set(np.argsort(dy, kind="stable")[:10])
    assert full.per_point[i] == pytest.approx(len(both) / 10)
    assert "n=400)" in full.caption() and full.caption().startswith(
        f"T={full.trustworthiness:.2f} C={full.continuity:.2f} kNN kept")
    part = F.faithfulness(x, y, k=10, metric="euclidean", max_points=100, seed=0)
    assert (part.n, part.n_total, part.seed) == (100, 400, 0)
    assert int(np.isfinite(part.per_point).sum()) == 100
    assert "n=100 of 400, seed 0" in part.caption()
    again = F.faithfulness(x, y, k=10, metric="euclidean", max_points=100, seed=0)
    assert again.trustworthiness == part.trustworthiness                   # seeded


def test_faithfulness_bounds_k_and_refuses_bad_input():
    x, y = _data(9, 4)
    f = F.faithfulness(x, y, k=10, metric="euclidean")
    assert f.k == 4                                                        # below n / 2
    assert F.faithfulness(x[:4], y[:4]) is None
    with pytest.raises(InputError, match="map of shape"):
        F.faithfulness(x, y[:5])
    with pytest.raises(InputError, match="less than n / 2"):
        F.trustworthiness(x, y, 5)


def test_map_faithfulness_of_a_projection_uses_the_layer_vectors():
    from elmo_engine.analysis.projection import LayerSpec, Projector, all_tokens

    rng = np.random.default_rng(0)
    sents = [["w"] * 30, ["v"] * 25]
    acts = [rng.normal(size=(2, len(s), 16)).astype(np.float32) for s in sents]
    tokens = all_tokens(sents)
    proj = Projector().pca(acts, tokens, LayerSpec.single(1))
    f = F.map_faithfulness(acts, tokens, proj, k=5)
    x = np.concatenate([a[1] for a in acts])
    assert f.trustworthiness == pytest.approx(
        F.trustworthiness(x, proj.coords.astype(np.float64), 5, "cosine"), abs=1e-6)


# ---- hubness ------------------------------------------------------------------------------------
def test_k_occurrence_sums_to_n_k_and_skewness_is_scipys():
    from scipy.stats import skew

    x = np.random.default_rng(1).normal(size=(300, 40))
    c = H.k_occurrence(x, 5)
    assert c.sum() == 300 * 5
    assert H.skewness(c) == pytest.approx(float(skew(c)), abs=1e-12)
    assert H.skewness(np.full(10, 3)) == 0.0


def test_a_planted_hub_is_found():
    """Anisotropic points (Gaussian around a common direction, as contextual vectors are) in
    60 dimensions: their mean is nearer in cosine to each of them than any other point is, so
    it is in every point's 5 nearest neighbours (N_k = n), the top hub, and the k-occurrence
    is strongly right-skewed."""
    rng = np.random.default_rng(2)
    pts = (rng.normal(size=(200, 60)) + 3.0).astype(np.float32)
    rows = np.concatenate([pts, pts.mean(0, keepdims=True)])[None]       # (1, 201, 60)
    sentences = [[f"w{i}" for i in range(100)], [f"w{i}" for i in range(100, 200)] + ["HUB"]]
    res = H.hubness(rows, sentences, k=5, seed=0)
    lay = res.layers[0]
    assert lay.hubs[0].token == "HUB" and lay.hubs[0].count == 200
    assert lay.hubs[0].context.endswith("[HUB]") and lay.hubs[0].context.startswith("… ")
    assert lay.skewness > 5 and lay.max_count == 200
    assert sum(lay.distribution) == 201 and lay.distribution[200] == 1
    assert res.to_dict()["layers"][0]["hubs"][0] == {"token": "HUB", "count": 200,
                                                     "context": lay.hubs[0].context}


def test_hubness_samples_the_same_tokens_at_every_layer():
    rng = np.random.default_rng(4)
    sentences = [[f"t{i}" for i in range(50)] for _ in range(4)]
    rows = rng.normal(size=(3, 200, 8)).astype(np.float32)
    res = H.hubness(rows, sentences, k=3, max_points=60, seed=1)
    assert (res.n, res.n_total, res.k, len(res.layers)) == (60, 200, 3, 3)
    assert all(sum(lay.distribution) == 60 for lay in res.layers)
    with pytest.raises(InputError, match="activation rows"):
        H.hubness(rows[:, :10], sentences)


def test_hubs_list_each_spelling_once():
    counts = np.array([5, 9, 9, 1, 7, 0])
    words = ["a", ",", ",", "b", "c", ","]
    lay = H.layer_hubness(0, counts, words, [f"ctx{i}" for i in range(6)], top=3)
    assert [(h.token, h.count, h.context) for h in lay.hubs] == [
        (",", 9, "ctx1"), ("c", 7, "ctx4"), ("a", 5, "ctx0")]
    assert lay.distribution == (1, 1, 0, 0, 0, 1, 0, 1, 0, 2) and lay.anti_hubs == 1 / 6


def test_the_blocks_do_not_change_the_numbers(monkeypatch):
    x, y = _data(300, 10, seed=9)
    whole = F.faithfulness(x, y, k=7, metric="euclidean")
    monkeypatch.setattr(F, "BLOCK_CELLS", 7 * 300 * 9)                  # blocks of 9 rows
    small = F.faithfulness(x, y, k=7, metric="euclidean")
    assert (small.trustworthiness, small.continuity) == (whole.trustworthiness, whole.continuity)
    np.testing.assert_array_equal(small.per_point, whole.per_point)
