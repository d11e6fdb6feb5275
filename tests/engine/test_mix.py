"""ScalarMix: the torch module against the NumPy reference, weights, fixed parameters, layer
norm."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from elmo_engine.model.mix import ScalarMix, scalar_mix_numpy, softmax_weights


def _layers(seed=0, k=3, b=2, t=5, d=4):
    rng = np.random.default_rng(seed)
    # layers of very different scales and offsets, so that layer norm matters
    h = rng.normal(size=(k, b, t, d)) * np.arange(1, k + 1)[:, None, None, None] * 3.0
    return (h + np.arange(k)[:, None, None, None]).astype(np.float32)


def test_weights_sum_to_one_and_start_equal():
    mix = ScalarMix(4)
    w = mix.weights_numpy()
    assert w.shape == (4,)
    np.testing.assert_allclose(w, 0.25, atol=1e-7)
    with torch.no_grad():
        mix.s.copy_(torch.tensor([3.0, -1.0, 0.5, 2.0]))
    w = mix.weights_numpy()
    assert abs(w.sum() - 1.0) < 1e-12
    assert np.argmax(w) == 0
    np.testing.assert_allclose(w, softmax_weights([3.0, -1.0, 0.5, 2.0]))


@pytest.mark.parametrize("layer_norm", [False, True])
def test_module_matches_numpy_reference(layer_norm):
    h = _layers()
    s, gamma = [0.3, -1.2, 0.8], 1.7
    mask = np.ones(h.shape[1:3], bool)
    mask[1, 3:] = False                                  # sentence 2 is shorter: padding
    mix = ScalarMix(3, layer_norm=layer_norm, initial_s=s, initial_gamma=gamma)
    got = mix(torch.from_numpy(h), torch.from_numpy(mask)).detach().numpy()
    want = scalar_mix_numpy(h, s, gamma, mask=mask, layer_norm=layer_norm)
    assert got.shape == (2, 5, 4)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    if not layer_norm:   # without layer norm the mask changes nothing: plain weighted sum
        w = softmax_weights(s)
        np.testing.assert_allclose(got, gamma * np.einsum("k,kbtd->btd", w, h), rtol=1e-5, atol=1e-5)


def test_layer_norm_uses_one_scalar_per_layer_over_valid_elements():
    h = _layers(seed=1)
    mask = np.ones(h.shape[1:3], bool)
    mask[0, 4] = False
    h_pad = h.copy()
    h_pad[:, 0, 4] = 1e6                                 # padded garbage must not move the stats
    a = scalar_mix_numpy(h, [0, 0, 0], mask=mask, layer_norm=True)
    b = ScalarMix(3, layer_norm=True)(torch.from_numpy(h_pad), torch.from_numpy(mask)).detach().numpy()
    np.testing.assert_allclose(a[mask], b[mask], rtol=1e-5, atol=1e-5)
    # after normalisation a selected layer has mean 0 and variance 1 over the valid elements
    sel = scalar_mix_numpy(h, [-9e10, 1, -9e10], mask=mask, layer_norm=True)
    assert abs(sel[mask].mean()) < 1e-6 and abs(sel[mask].var() - 1) < 1e-6


def test_fixed_parameters_select_a_layer_and_are_not_trained():
    h = torch.from_numpy(_layers(seed=2))
    mix = ScalarMix(3, initial_s=[-9e10, 1, -9e10], trainable=False)
    assert list(mix.parameters()) == []
    out = mix(h)
    torch.testing.assert_close(out, h[1])


def test_list_input_and_gradients_reach_s_and_gamma():
    h = [torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(k)) for k in range(3)]
    mix = ScalarMix(3)
    mix(h).pow(2).sum().backward()
    assert mix.s.grad is not None and mix.s.grad.abs().sum() > 0
    assert mix.gamma.grad is not None and mix.gamma.grad.abs().item() > 0


def test_wrong_layer_count_is_refused():
    with pytest.raises(ValueError, match="3 layers got 2"):
        ScalarMix(3)(torch.zeros(2, 4, 5))
    with pytest.raises(ValueError, match="initial_s"):
        ScalarMix(3, initial_s=[0.0, 1.0])
