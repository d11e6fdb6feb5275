"""Linear CKA (Kornblith et al. 2019) with the biased and the unbiased HSIC estimators."""
from __future__ import annotations

import numpy as np
import pytest

from elmo_engine.analysis.layers.cka import CKAResult, cka_matrix, cross_cka, linear_cka
from elmo_engine.errors import CancelledError, InputError
from elmo_engine.progress import TaskState


@pytest.fixture(autouse=True, scope="module")
def _one_blas_thread():
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        yield


def hsic_direct(k, m, unbiased):
    """HSIC straight from the n x n kernels: tr(KHLH)/(n-1)², or Song et al.'s HSIC₁."""
    n = k.shape[0]
    if not unbiased:
        h = np.eye(n) - np.ones((n, n)) / n
        return np.trace(k @ h @ m @ h) / (n - 1) ** 2
    kt, lt = k - np.diag(np.diag(k)), m - np.diag(np.diag(m))
    one = np.ones(n)
    return (np.trace(kt @ lt) + (one @ kt @ one) * (one @ lt @ one) / ((n - 1) * (n - 2))
            - 2.0 / (n - 2) * one @ kt @ lt @ one) / (n * (n - 3))


def cka_direct(x, y, unbiased):
    k, m = x @ x.T, y @ y.T
    return hsic_direct(k, m, unbiased) / np.sqrt(hsic_direct(k, k, unbiased)
                                                 * hsic_direct(m, m, unbiased))


def test_hand_computed_one_feature():
    x = np.array([[1.0], [2.0], [3.0], [4.0]])
    y = np.array([[1.0], [3.0], [2.0], [4.0]])
    # one feature each: biased linear CKA is the squared Pearson correlation, 0.8² = 0.64
    assert linear_cka(x, y, unbiased=False) == pytest.approx(0.64, abs=1e-12)
    # centred x = (-1.5, -.5, .5, 1.5), y = (-1.5, .5, -.5, 1.5): ‖xᵀy‖² = 16, d_x·d_y = 10.25,
    # Σd = 5, n = 4 → HSIC₁ ∝ 16 - 10.25 + 25/6 - 10.25 = -1/3, self terms 26/3 → -1/26
    assert linear_cka(x, y, unbiased=True) == pytest.approx(-1 / 26, abs=1e-12)


@pytest.mark.parametrize("unbiased", [True, False])
@pytest.mark.parametrize("method", ["feature", "gram"])
def test_agrees_with_the_direct_quadratic_formula(unbiased, method):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 10)) + 3.0                # not centred: the direct formula centres
    y = x @ rng.normal(size=(10, 7)) + rng.normal(size=(60, 7)) - 1.0
    assert linear_cka(x, y, unbiased, method) == pytest.approx(cka_direct(x, y, unbiased),
                                                               abs=1e-10)


@pytest.mark.parametrize("unbiased", [True, False])
def test_identity_orthogonal_and_scale_invariance(unbiased):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(200, 12))
    q, _ = np.linalg.qr(rng.normal(size=(12, 12)))
    assert linear_cka(x, x, unbiased) == pytest.approx(1.0, abs=1e-12)
    assert linear_cka(x, 7.5 * x @ q + 2.0, unbiased) == pytest.approx(1.0, abs=1e-10)
    y = np.tanh(x[:, :5]) + 0.3 * rng.normal(size=(200, 5))
    base = linear_cka(x, y, unbiased)
    assert 0.1 < base < 0.99
    assert linear_cka(0.01 * x @ q, 40 * y, unbiased) == pytest.approx(base, abs=1e-10)


def test_unbiased_estimator_is_near_zero_for_independent_matrices():
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(100, 50)), rng.normal(size=(100, 50))
    assert abs(linear_cka(a, b, unbiased=True)) < 0.05
    assert linear_cka(a, b, unbiased=False) > 0.25          # the small-sample bias


def test_layer_matrix_is_symmetric_with_ones_on_the_diagonal():
    rng = np.random.default_rng(3)
    base = rng.normal(size=(300, 16))
    layers = np.stack([base, base @ rng.normal(size=(16, 16)) + rng.normal(size=(300, 16)),
                       rng.normal(size=(300, 16))]).astype(np.float32)
    m = cka_matrix(layers)
    assert m.shape == (3, 3)
    np.testing.assert_allclose(m, m.T, atol=0)
    np.testing.assert_allclose(np.diag(m), 1.0, atol=1e-12)
    assert m[0, 1] == pytest.approx(linear_cka(layers[0], layers[1]), abs=1e-9)
    assert abs(m[0, 2]) < 0.1 < m[0, 1]
    for method in ("feature", "gram"):
        np.testing.assert_allclose(cka_matrix(layers, method=method), m, atol=1e-9)
    fwd = cka_matrix(layers, direction="forward")
    assert fwd[0, 1] == pytest.approx(linear_cka(layers[0][:, :8], layers[1][:, :8]), abs=1e-9)


def test_cross_model_matrix():
    rng = np.random.default_rng(4)
    a = rng.normal(size=(3, 120, 8))
    b = np.stack([a[2] * 3.0, a[0] @ np.linalg.qr(rng.normal(size=(8, 8)))[0]])
    m = cross_cka(a, b)
    assert m.shape == (3, 2)
    assert m[2, 0] == pytest.approx(1.0, abs=1e-10) and m[0, 1] == pytest.approx(1.0, abs=1e-10)
    assert m[1, 0] == pytest.approx(linear_cka(a[1], b[0]), abs=1e-10)
    np.testing.assert_allclose(cross_cka(a, a), cka_matrix(a), atol=1e-10)
    with pytest.raises(InputError, match="same tokens"):
        cross_cka(a, b[:, :100])


def test_result_json_and_errors():
    res = CKAResult(np.array([[1.0, np.nan], [np.nan, 1.0]]), ["a", "b"], ["a", "b"], True, 10, 2)
    d = res.to_dict()
    assert d["matrix"] == [[1.0, None], [None, 1.0]] and d["estimator"] == "unbiased"
    with pytest.raises(InputError, match="at least 4 tokens"):
        linear_cka(np.ones((3, 2)), np.ones((3, 2)))
    with pytest.raises(InputError, match="same tokens"):
        linear_cka(np.ones((5, 2)), np.ones((6, 2)))


def test_progress_and_cancel():
    layers = np.random.default_rng(5).normal(size=(3, 50, 4))
    seen = []
    cka_matrix(layers, state=TaskState(lambda d, t, m: seen.append((d, t))))
    assert seen[-1] == (6, 6)                      # 6 layer pairs, the diagonal included
    state = TaskState(lambda d, t, m: state.cancel())
    with pytest.raises(CancelledError):
        cka_matrix(layers, state=state)
