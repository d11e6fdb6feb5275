"""The arithmetic of one token through the biLM (Peters et al. 2018, "Deep contextualized word
representations"; the architecture of docs/checkpoint-format.md §6–§9), counted from its
options: the yardstick that benchmarks divide a measured GEMM rate by to get a ceiling in
tokens/s (``benchmarks/hostinfo.py``, :func:`ceiling_share` there).

FLOPs count 2 per multiply-add and only the matrix products (convolutions, highway, the token
projection, the LSTM's input, recurrent and cell-projection GEMMs, both directions); the
element-wise work (gates, max-pool, clips) is left out, as is usual for a GEMM ceiling.
"""
from __future__ import annotations

from dataclasses import dataclass

from elmo_engine.model.options import BiLMOptions


@dataclass(frozen=True)
class TokenFlops:
    """FLOPs of one token, by part (2 per multiply-add).

    Attributes
    ----------
    lstm : both directions, every layer: ``x @ W_in``, ``h @ W_rec`` and ``m @ W_p``
    char_cnn : every filter over every valid window of the token's characters
    highway : the highway layers (carry and transform GEMMs)
    projection : the token projection (n_filters → projection_dim), 0 without one
    """

    lstm: float
    char_cnn: float
    highway: float
    projection: float

    @property
    def token_layer(self) -> float:
        """The context-free part (char-CNN, highway, projection)."""
        return self.char_cnn + self.highway + self.projection

    @property
    def total(self) -> float:
        return self.lstm + self.token_layer


def flops_per_token(opts: BiLMOptions, types_per_token: float = 1.0) -> TokenFlops:
    """FLOPs of one token through the model described by ``opts``.

    Parameters
    ----------
    opts : the model's options
    types_per_token : how often the token layer runs per token: 1.0 (the model's nominal
        count), or distinct word types / tokens for the engine, which runs it once per type

    The published original size (4,096 cells, projection 512, 2,048 filters, 2 highway layers)
    gives 151 M in the LSTMs and 204 M in all.
    """
    p, d, out = opts.projection_dim, opts.lstm_dim, opts.output_dim
    lstm = 0
    for layer in range(opts.n_layers):
        in_dim = p if layer == 0 else out
        per_direction = in_dim * 4 * d + out * 4 * d + (d * p if opts.has_lstm_projection else 0)
        lstm += 2 * 2 * per_direction                       # 2 directions × 2 FLOPs per MAC
    m, c, n = opts.max_characters_per_token, opts.char_embed_dim, opts.n_filters
    cnn = sum(2 * (m - w + 1) * w * c * k for w, k in opts.filters)
    highway = opts.n_highway * 2 * (2 * n * n)              # carry and transform, n × n each
    proj = 2 * n * p if opts.has_token_projection else 0
    return TokenFlops(lstm=float(lstm), char_cnn=types_per_token * cnn,
                      highway=types_per_token * highway, projection=types_per_token * proj)
