"""Aligned layer trajectories (issue 42): Procrustes, AlignedUMAP, kNN change, the animation."""
from __future__ import annotations

import numpy as np
import pytest

from elmo_engine.errors import CancelledError, InputError
from elmo_engine.progress import TaskState
from elmo_engine.analysis.projection.aligned import (AlignedLayer, AlignMethod, Half,
                                                     align_layers, aligned_features, interpolate,
                                                     parse_layers, procrustes, procrustes_layouts)
from elmo_engine.analysis.projection.knn_change import jaccard_rows, knn_changes, neighbour_sets
from elmo_engine.analysis.projection.tokens import all_tokens

L0F, L0B = AlignedLayer(0, Half.FORWARD), AlignedLayer(0, Half.BACKWARD)


def _fake_model(n_sentences=20, length=12, vocab=60, half=8, seed=0):
    """Sentences and ``(3, n, 2·half)`` activations shaped like the biLM's: layer 0 is
    ``[token, token]`` (one vector per word, shared by both directions), layers 1 and 2 are
    noisy functions of it."""
    rng = np.random.default_rng(seed)
    sents = [[f"w{rng.integers(0, vocab)}" for _ in range(length)] for _ in range(n_sentences)]
    table: dict = {}
    acts = []
    for s in sents:
        t = np.stack([table.setdefault(w, rng.normal(size=half)) for w in s])        # (n, h)
        l1 = np.hstack([t + rng.normal(size=t.shape) * 0.5, t + rng.normal(size=t.shape) * 0.5])
        l2 = l1 + rng.normal(size=l1.shape)
        acts.append(np.stack([np.hstack([t, t]), l1, l2]).astype(np.float32))       # (3, n, 2h)
    return all_tokens(sents), acts


def _spread(c: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.sum((c - c.mean(0)) ** 2, axis=1))))


def test_parse_layers_and_halves():
    assert parse_layers("0, 1 2", 3) == (AlignedLayer(0), AlignedLayer(1), AlignedLayer(2))
    assert parse_layers("0f,2B", 3) == (L0F, AlignedLayer(2, Half.BACKWARD))
    assert [x.key for x in parse_layers("1f 1b", 3)] == ["layer1f", "layer1b"]
    for bad, msg in (("0,3", "does not exist"), ("0,x", "not a layer"), ("1", "at least two")):
        with pytest.raises(InputError, match=msg):
            parse_layers(bad, 3)


def test_layer_zero_halves_are_the_same_vector():
    tokens, acts = _fake_model()
    f, b = aligned_features(acts, tokens, L0F), aligned_features(acts, tokens, L0B)
    assert f.shape == (len(tokens), 8)
    np.testing.assert_array_equal(f, b)
    assert not np.array_equal(aligned_features(acts, tokens, AlignedLayer(1, Half.FORWARD)),
                              aligned_features(acts, tokens, AlignedLayer(1, Half.BACKWARD)))


def test_procrustes_recovers_a_planted_similarity():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(200, 2))
    a = 0.7
    rot = np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
    y = 2.5 * x @ rot + np.array([3.0, -1.0])
    s = procrustes(x, y)
    np.testing.assert_allclose(s.rotation, rot, atol=1e-12)
    assert s.scale == pytest.approx(2.5, abs=1e-12)
    np.testing.assert_allclose(s.translation, [3.0, -1.0], atol=1e-12)
    np.testing.assert_allclose(s.apply(x), y, atol=1e-12)
    # a reflection is found (maps have arbitrary signs), or refused on request
    flip = x * np.array([1.0, -1.0])
    assert np.allclose(procrustes(x, flip).apply(x), flip, atol=1e-12)
    rot_only = procrustes(x, flip, reflection=False)
    assert np.linalg.det(rot_only.rotation) == pytest.approx(1.0)
    assert not np.allclose(rot_only.apply(x), flip, atol=1e-3)


def test_procrustes_layouts_residuals():
    rng = np.random.default_rng(2)
    ref = rng.normal(size=(50, 2))
    noisy = ref @ np.array([[0.0, 1.0], [-1.0, 0.0]]) + rng.normal(size=ref.shape) * 0.1
    coords, res = procrustes_layouts([noisy, ref], reference=1)
    assert coords.shape == (2, 50, 2) and res[1] == 0.0
    assert 0.02 < res[0] < 0.2                          # the noise, not the rotation, is left


def test_identical_layers_coincide_exactly_with_procrustes():
    tokens, acts = _fake_model()
    for base in ("pca", "umap"):
        r = align_layers(acts, tokens, (L0F, L0B, AlignedLayer(1)), AlignMethod.PROCRUSTES,
                         base=base, reference=0)
        assert r.coords.shape == (3, len(tokens), 2) and r.reference == 0
        np.testing.assert_allclose(r.coords[1], r.coords[0], atol=1e-5 * _spread(r.coords[0]))
        assert r.residuals[1] < 1e-6 and r.residuals[2] > 0.05


@pytest.mark.slow
def test_identical_layers_nearly_coincide_with_aligned_umap():
    """Tolerance: the mean distance between a token's two positions is under 10% of the
    layout's RMS spread (measured 4%: each layer's spectral start differs, the alignment
    penalty pulls them together)."""
    tokens, acts = _fake_model()
    seen = []
    r = align_layers(acts, tokens, (L0F, L0B), AlignMethod.ALIGNED_UMAP,
                     state=TaskState(lambda d, t, m: seen.append(m)))
    c = r.coords
    assert c.shape == (2, len(tokens), 2) and np.isfinite(c).all()
    gap = np.linalg.norm(c[0] - c[1], axis=1).mean() / _spread(c[0])
    assert gap < 0.10
    assert any("epoch" in m for m in seen)
    state = TaskState()
    state.cancel()
    with pytest.raises(CancelledError):
        align_layers(acts, tokens, (L0F, L0B), AlignMethod.ALIGNED_UMAP, state=state)


def test_interpolate_is_linear_between_layers():
    c = np.array([[[0.0, 0.0]], [[2.0, 4.0]], [[2.0, 0.0]]], np.float32)       # (3, 1, 2)
    np.testing.assert_allclose(interpolate(c, 0.25), [[0.5, 1.0]])
    np.testing.assert_allclose(interpolate(c, 1.5), [[2.0, 2.0]])
    np.testing.assert_allclose(interpolate(c, 2.0), [[2.0, 0.0]])
    np.testing.assert_allclose(interpolate(c, 9.0), [[2.0, 0.0]])              # clamped


def test_jaccard_by_hand():
    a = np.array([[1, 2, 3], [4, 5, 6], [7, 8, 9]])
    b = np.array([[3, 2, 1], [4, 5, 9], [1, 2, 3]])
    # {1,2,3} vs itself: 1; {4,5,6} vs {4,5,9}: 2/4; disjoint: 0
    np.testing.assert_allclose(jaccard_rows(a, b), [1.0, 0.5, 0.0])


def test_neighbour_sets_leave_the_token_out():
    x = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]], np.float32)
    nb = neighbour_sets(x, 1)
    assert nb[:, 0].tolist() == [1, 0, 3, 2]
    with pytest.raises(InputError, match="k must be"):
        neighbour_sets(x, 4)


def test_knn_changes_rank_the_moved_token_first():
    rng = np.random.default_rng(3)
    sents = [[f"t{i}" for i in range(40)]]
    tokens = all_tokens(sents)
    xa = rng.normal(size=(40, 6)).astype(np.float32)
    xb = xa.copy()
    xb[7] = -xa[7]                                      # token 7 moves to the far side
    ch = knn_changes(xa, xb, tokens, k=5, top=3, names=("layer 1", "layer 2"))
    assert ch.k == 5 and ch.jaccard.shape == (40,)
    assert ch.top[0].index == 7 and ch.top[0].word == "t7" and ch.top[0].jaccard == 0.0
    assert len(ch.top[0].lost) == 5 and len(ch.top[0].gained) == 5
    assert ch.jaccard[[i for i in range(40) if i != 7]].mean() > 0.7


def test_animation_gif_frame_count_and_size(tmp_path):
    iio = pytest.importorskip("imageio.v3")
    from elmo_engine.analysis.projection.animation import (AnimationSpec, render_frames,
                                                           write_animation, write_frames)

    tokens, acts = _fake_model(n_sentences=4)
    r = align_layers(acts, tokens, (AlignedLayer(0), AlignedLayer(1), AlignedLayer(2)),
                     AlignMethod.PROCRUSTES)
    spec = AnimationSpec(steps=4, fps=10, width=320, height=240, trails=(0, 5),
                         codes=np.arange(len(tokens)) % 3)
    frames = render_frames(r, tokens.words, spec)
    assert len(frames) == spec.n_frames(3) == 9
    assert frames[0].shape == (240, 320, 3) and frames[0].dtype == np.uint8
    gif = write_animation(tmp_path / "a.gif", frames, spec.fps)
    back = iio.imread(gif, index=None)
    assert back.shape[0] == 9 and back.shape[1:3] == (240, 320)
    pngs = write_frames(tmp_path / "frames", frames)
    assert len(pngs) == 9 and iio.imread(pngs[4]).shape[:2] == (240, 320)
    with pytest.raises(InputError, match="gif or .mp4"):
        write_animation(tmp_path / "a.avi", frames, 10)
