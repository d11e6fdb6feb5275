"""The biLM's FLOPs per token (elmo_engine.model.flops), counted by hand on a tiny model."""
from __future__ import annotations

import pytest

from elmo_engine.model.flops import flops_per_token
from elmo_engine.model.options import BiLMOptions

TINY = BiLMOptions(filters=((1, 2), (2, 3)), char_embed_dim=4, max_characters_per_token=5,
                   n_highway=1, projection_dim=3, lstm_dim=6, n_layers=1)


def test_tiny_model_counted_by_hand():
    f = flops_per_token(TINY)
    # LSTM, one layer: per direction x@W_in 3·24 + h@W_rec 3·24 + m@W_p 6·3 = 162 MACs;
    # two directions, 2 FLOPs per MAC
    assert f.lstm == 2 * 2 * 162 == 648
    # width 1, 2 filters: 5 windows · 1·4 · 2 = 40 MACs; width 2, 3 filters: 4 · 2·4 · 3 = 96
    assert f.char_cnn == 2 * (40 + 96) == 272
    assert f.highway == 2 * 2 * 5 * 5 == 100            # carry and transform, 5 × 5 each
    assert f.projection == 2 * 5 * 3 == 30               # 5 filters → projection 3
    assert f.token_layer == 402 and f.total == 1050
    half = flops_per_token(TINY, types_per_token=0.5)   # the token layer once per two tokens
    assert half.lstm == 648 and half.total == pytest.approx(648 + 201)


def test_original_size_is_the_published_204_mflop():
    filters = ((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024))
    f = flops_per_token(BiLMOptions(filters=filters))
    assert f.lstm == 150_994_944                        # 2 layers · 2 directions · 37.7 M
    assert round(f.total / 1e6, 1) == 204.3
    deeper = flops_per_token(BiLMOptions(filters=filters, n_layers=3))
    assert deeper.lstm == pytest.approx(1.5 * f.lstm)   # layers 1+ read the 512-wide output
