"""Online-code MDL probes (Voita & Titov 2020) on toy tasks with known structure."""
from __future__ import annotations

import math

import numpy as np
import pytest

from elmo_engine.analysis.layers.mdl import (BLOCK_FRACTIONS, MDLConfig, block_boundaries,
                                      online_codelength, uniform_codelength)
from elmo_engine.errors import CancelledError, InputError
from elmo_engine.progress import TaskState

FAST = MDLConfig(max_epochs=8, lr=0.1)      # the toy tasks are separable: train fast


@pytest.fixture(autouse=True, scope="module")
def _one_thread(torch_one_thread):
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        yield


def toy(n=1200, dim=6, k=4, seed=0):
    """Layer 0 is noise; layer 1 determines the label (argmax of a linear map)."""
    rng = np.random.default_rng(seed)
    feats = rng.normal(size=(2, n, dim)).astype(np.float32)
    labels = (feats[1] @ rng.normal(size=(dim, k))).argmax(axis=1)
    return feats, labels, rng


def test_block_boundaries_follow_the_paper():
    assert BLOCK_FRACTIONS == (0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.0625, 0.125, 0.25,
                               0.5, 1.0)
    assert block_boundaries(10_000) == [10, 20, 40, 80, 160, 320, 625, 1250, 2500, 5000, 10_000]
    assert block_boundaries(100) == [1, 3, 6, 12, 25, 50, 100]      # repeats dropped
    assert block_boundaries(2) == [1, 2]
    with pytest.raises(InputError):
        block_boundaries(1)


def test_uniform_code_and_block_sums():
    feats, labels, _ = toy(n=500)
    res = online_codelength(feats, labels, config=FAST)
    n, k = len(labels), 4
    assert res.uniform_bits == pytest.approx(n * math.log2(k), abs=1e-9)
    assert uniform_codelength(n, k) == pytest.approx(n * 2.0)
    sizes = np.diff([0] + res.boundaries)
    assert sum(s * math.log2(k) for s in sizes) == pytest.approx(res.uniform_bits)
    for c in res.layers + [res.mix]:
        assert c.block_bits[0] == pytest.approx(res.boundaries[0] * math.log2(k))   # block 1
        assert len(c.block_bits) == len(res.boundaries)
        assert c.online_bits == pytest.approx(sum(c.block_bits))
        assert c.compression == pytest.approx(res.uniform_bits / c.online_bits)


def test_deterministic_labels_compress_far_better_than_random_ones():
    feats, labels, rng = toy()
    det = online_codelength(feats, labels, config=FAST)
    rand = online_codelength(feats, rng.integers(0, 4, len(labels)), config=FAST)
    assert det.layers[1].compression > 3.0
    assert det.layers[1].final_block_accuracy > 0.9
    assert det.layers[0].compression < 1.1                     # layer 0 holds no information
    for c in rand.layers + [rand.mix]:
        assert c.compression < 1.1
    assert det.layers[1].compression > 3 * rand.layers[1].compression
    # the mix finds the informative layer
    assert det.mix.weights[1] > 0.5 and sum(det.mix.weights) == pytest.approx(1.0)
    assert det.mix.compression > 3.0


def test_groups_restrict_the_code_to_each_groups_labels():
    feats, labels, _ = toy(n=600)
    groups = np.where(labels < 2, "low", "high")
    # "low" examples have labels {0, 1}, "high" ones {2, 3}: one bit each under the uniform code
    res = online_codelength(feats, labels, groups=list(groups), config=FAST)
    assert res.uniform_bits == pytest.approx(600.0)
    single = online_codelength(feats, labels, groups=[str(v) for v in labels], config=FAST)
    assert single.uniform_bits == 0.0 and single.layers[1].online_bits == pytest.approx(0, abs=1e-6)


def test_reproducible_and_json():
    feats, labels, _ = toy(n=400)
    a = online_codelength(feats, labels, config=FAST)
    b = online_codelength(feats, labels, config=FAST)
    assert [c.online_bits for c in a.layers] == [c.online_bits for c in b.layers]
    d = a.to_dict()
    assert d["classes"] == 4 and d["labels"] == ["0", "1", "2", "3"]
    assert d["layers"][1]["compression"] == pytest.approx(a.layers[1].compression)
    assert d["mix"]["weights"] == a.mix.weights


def test_warm_start_without_mix():
    feats, labels, _ = toy(n=400)
    res = online_codelength(feats, labels, config=MDLConfig(max_epochs=8, warm_start=True,
                                                            mix=False))
    assert res.mix is None and len(res.layers) == 2
    assert res.layers[1].compression > res.layers[0].compression


def test_errors_and_cancel():
    feats, labels, _ = toy(n=100)
    with pytest.raises(InputError, match="fewer than two"):
        online_codelength(feats, [0] * 100)
    with pytest.raises(InputError, match="99 labels"):
        online_codelength(feats, labels[:99])
    state = TaskState(lambda d, t, m: state.cancel() if d >= 1 else None)
    with pytest.raises(CancelledError):
        online_codelength(feats, labels, config=FAST, state=state)
