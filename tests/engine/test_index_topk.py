"""The same-word search's scoring pieces: top-k without a full sort, float16 cosines by blocks."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from elmo_engine.index.search import cosines, top_rows


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-3, 3), min_size=0, max_size=60), st.integers(1, 12))
def test_top_rows_is_a_stable_descending_sort(values, k):
    scores = np.asarray(values, np.float32) / 4          # many ties, also at the k-th place
    expected = np.argsort(-scores, kind="stable")[:k]
    np.testing.assert_array_equal(top_rows(scores, k), expected)


def test_cosines_match_numpy_in_float32_across_block_edges():
    rng = np.random.default_rng(0)
    vecs = rng.standard_normal((1000, 24)).astype(np.float16)                 # (N, D)
    rows = np.sort(rng.choice(1000, 333, replace=False))
    q = rng.standard_normal(24).astype(np.float32)
    got = cosines(vecs, rows, q, block=100)                                   # 4 blocks, 1 short
    want = vecs[rows].astype(np.float32) @ q
    assert got.shape == (333,) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert cosines(vecs, rows[:0], q).shape == (0,)
