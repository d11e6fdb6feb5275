"""ScalarMix — the ELMo weighting ``γ · Σ_k softmax(s)_k · h_k`` (docs/checkpoint-format.md
§10).

Two implementations of the same computation:

* :class:`ScalarMix`, a torch module with trainable (or fixed) ``s`` and ``γ``;
* :func:`scalar_mix_numpy`, a NumPy reference the tests compare the module against.

Both take the layers stacked on the first axis, ``(K, ..., D)``, and an optional mask over the
middle axes. With ``layer_norm=True`` each layer is normalised with **one scalar mean and one scalar
variance over every unmasked element** (all valid tokens × all dimensions), without learned scale
or shift, as AllenNLP's ``do_layer_norm`` does — not per token.
"""
from __future__ import annotations

from typing import Optional, Sequence, Union

import numpy as np
import torch
from torch import nn

#: AllenNLP's epsilon in the layer normalisation (float32 "tiny value")
LAYER_NORM_EPS = 1e-13


def softmax_weights(s: "Sequence[float] | np.ndarray") -> np.ndarray:
    """The normalised mixing weights ``softmax(s)`` as float64 (they sum to 1)."""
    x = np.asarray(s, dtype=np.float64)
    e = np.exp(x - x.max())
    return e / e.sum()


#: the largest |γ| a mix takes from the user: far beyond any trained γ (ELMo's are ~0.1-10), and
#: small enough that γ times a layer's values stays finite in float32
MAX_GAMMA = 1e6


def plain_weights(w: "Sequence[float] | np.ndarray") -> np.ndarray:
    """Plain (not pre-softmax) mixing weights normalised to sum 1, as float64: each finite and
    non-negative, not all zero, and their sum finite (``1e308`` three times overflowed to inf and
    made every weight 0, so the mix came out zero or NaN).

    Raises ValueError naming what is wrong."""
    x = np.asarray(list(w), dtype=np.float64)
    with np.errstate(over="ignore"):
        total = x.sum()
    if x.size == 0 or not np.all(np.isfinite(x)) or np.any(x < 0) or total <= 0:
        raise ValueError(f"mix weights must be non-negative and not all zero, got {x.tolist()}")
    if not np.isfinite(total):
        raise ValueError(f"mix weights too large: their sum overflows ({x.tolist()}); scale them "
                         "down, only their ratios count")
    return x / total


def scalar_mix_numpy(layers: np.ndarray, s: Sequence[float], gamma: float = 1.0,
                     mask: Optional[np.ndarray] = None, layer_norm: bool = False,
                     eps: float = LAYER_NORM_EPS) -> np.ndarray:
    """NumPy reference of :class:`ScalarMix`.

    Parameters
    ----------
    layers : (K, ..., D) the stacked layers
    s : (K,) pre-softmax scalars
    gamma : the scale γ
    mask : (...) boolean, True for valid positions (the middle axes of ``layers``); default all.
        Only the layer-norm statistics use it; padded positions are mixed like the others (as
        in AllenNLP) and should be ignored by the caller
    layer_norm : normalise each layer by its scalar mean/variance over the valid elements
    eps : added to the variance

    Returns
    -------
    (..., D) float64 mix
    """
    h = np.asarray(layers, dtype=np.float64)                       # (K, ..., D)
    w = softmax_weights(s)                                          # (K,)
    if len(w) != h.shape[0]:
        raise ValueError(f"{len(w)} mixing scalars for {h.shape[0]} layers")
    if layer_norm:
        m = np.ones(h.shape[1:-1], bool) if mask is None else np.asarray(mask, bool)
        normed = []
        for k in range(h.shape[0]):
            valid = h[k][m]                                         # (n_valid, D)
            mu = valid.mean()
            var = ((valid - mu) ** 2).mean()
            normed.append((h[k] - mu) / np.sqrt(var + eps))
        h = np.stack(normed)
    return gamma * np.tensordot(w, h, axes=(0, 0))                 # (..., D)


class ScalarMix(nn.Module):
    """``γ · Σ_k softmax(s)_k · h_k`` over ``K`` layers.

    Parameters
    ----------
    n_layers : K
    layer_norm : normalise each layer first (scalar mean/variance over the valid elements)
    initial_s : starting pre-softmax scalars (default zeros: equal weights)
    initial_gamma : starting γ (default 1)
    trainable : if False, ``s`` and ``γ`` are fixed buffers (AllenNLP's ``scalar_mix_parameters``;
        e.g. ``[-9e10, 1, -9e10]`` selects layer 1)
    eps : added to the variance in the layer normalisation
    """

    def __init__(self, n_layers: int, layer_norm: bool = False,
                 initial_s: Optional[Sequence[float]] = None, initial_gamma: float = 1.0,
                 trainable: bool = True, eps: float = LAYER_NORM_EPS):
        super().__init__()
        if n_layers < 1:
            raise ValueError("ScalarMix needs at least one layer")
        s0 = torch.zeros(n_layers) if initial_s is None else torch.tensor(
            [float(v) for v in initial_s], dtype=torch.float32)
        if s0.shape != (n_layers,):
            raise ValueError(f"initial_s has {s0.numel()} values for {n_layers} layers")
        g0 = torch.tensor([float(initial_gamma)])
        self.n_layers = n_layers
        self.layer_norm = layer_norm
        self.eps = eps
        if trainable:
            self.s = nn.Parameter(s0)
            self.gamma = nn.Parameter(g0)
        else:
            self.register_buffer("s", s0)
            self.register_buffer("gamma", g0)

    def normalized_weights(self) -> torch.Tensor:
        """``softmax(s)``, shape (K,)."""
        return torch.softmax(self.s, dim=0)

    def weights_numpy(self) -> np.ndarray:
        """The normalised weights as a float64 NumPy array (sums to 1)."""
        return softmax_weights(self.s.detach().cpu().double().numpy())

    def forward(self, layers: Union[torch.Tensor, Sequence[torch.Tensor]],
                mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Mix the layers.

        Parameters
        ----------
        layers : (K, ..., D) tensor, or a sequence of K tensors (..., D)
        mask : (...) boolean/0-1 tensor of valid positions; only the layer-norm statistics use it

        Returns
        -------
        (..., D) tensor
        """
        h = layers if isinstance(layers, torch.Tensor) else torch.stack(list(layers))
        if h.shape[0] != self.n_layers:
            raise ValueError(f"ScalarMix for {self.n_layers} layers got {h.shape[0]}")
        w = self.normalized_weights().to(h.dtype)                  # (K,)
        if self.layer_norm:
            h = self._normalise(h, mask)
        mixed = torch.tensordot(w, h, dims=([0], [0]))              # (..., D)
        return self.gamma.to(h.dtype) * mixed

    def _normalise(self, h: torch.Tensor, mask: Optional[torch.Tensor]) -> torch.Tensor:
        # h: (K, ..., D); one scalar mean and variance per layer over the valid elements
        if mask is None:
            flat = h.reshape(h.shape[0], -1)                        # (K, n·D)
            mu = flat.mean(dim=1)
            var = ((flat - mu[:, None]) ** 2).mean(dim=1)
        else:
            m = mask.to(h.dtype).unsqueeze(-1)                      # (..., 1)
            count = m.sum() * h.shape[-1]
            dims = tuple(range(1, h.dim()))
            mu = (h * m).sum(dim=dims) / count                      # (K,)
            centred = (h - mu.view(-1, *([1] * (h.dim() - 1)))) * m
            var = (centred ** 2).sum(dim=dims) / count
        shape = (-1, *([1] * (h.dim() - 1)))
        return (h - mu.view(shape)) / torch.sqrt(var.view(shape) + self.eps)


__all__ = ["LAYER_NORM_EPS", "ScalarMix", "scalar_mix_numpy", "softmax_weights"]
