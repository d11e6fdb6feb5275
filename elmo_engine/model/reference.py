"""A plain, slow reference path for the biLM, written straight from the spec.

Used by the tests and by ``benchmarks/bench_bilm.py`` to check the fast path in
:mod:`elmo_engine.model.bilm`. It shares nothing with it but the loaded weights: one sentence at a
time, one direction at a time, the full ``concat(x, h) @ W_0`` at every step, no caches, no sorting.
"""
from __future__ import annotations

from typing import List, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from elmo_engine.model.bilm import BiLM
from elmo_engine.model.chars import BOS_TOKEN, EOS_TOKEN, char_ids_for_types
from elmo_engine.model.layout import model_tensors


def conv1d_token_layer(char_cnn, char_ids: torch.Tensor) -> torch.Tensor:
    """The token layer as the spec writes it, on a model's own (differentiable) parameters:
    every filter over all ``M`` character positions with ``conv1d``, then max, highway and
    projection. ``char_ids`` (n, M) → (n, P). The benchmark's baseline and the tests of the
    pooled fast path in :class:`elmo_engine.model.bilm.CharCNN` use it."""
    cc = char_cnn
    table = torch.cat([cc.char_embed.new_zeros(1, cc.char_embed.shape[1]), cc.char_embed], 0)
    emb = F.embedding(char_ids, table).transpose(1, 2)                # (n, C, M)
    act = torch.relu if cc.opts.activation == "relu" else torch.tanh
    x = torch.cat([act(F.conv1d(emb, w[0].permute(2, 1, 0), b).amax(2))
                   for w, b in zip(cc.conv_w, cc.conv_b)], 1)
    for wc, bc, wt, bt in zip(cc.w_carry, cc.b_carry, cc.w_transform, cc.b_transform):
        g = torch.sigmoid(torch.addmm(bc, x, wc))
        x = g * torch.relu(torch.addmm(bt, x, wt)) + (1.0 - g) * x
    return torch.addmm(cc.b_proj, x, cc.w_proj) if cc.w_proj is not None else x


class ReferenceBiLM:
    """Stateless reference: ``embed(tokens) -> (L+1, n, 2·out)`` float32."""

    def __init__(self, model: BiLM):
        self.opts = model.opts
        self.w = {k: torch.from_numpy(v.copy()) for k, v in model_tensors(model).items()}

    def token_layer(self, tokens: Sequence[str]) -> torch.Tensor:
        o, w = self.opts, self.w
        ids = torch.from_numpy(char_ids_for_types(list(tokens), o.max_characters_per_token))
        table = torch.cat([torch.zeros(1, o.char_embed_dim), w["char_embed"]])
        emb = table[ids]                                              # (n, M, C)
        feats = []
        for i, (width, _k) in enumerate(o.filters):
            kern = w[f"CNN/W_cnn_{i}"][0]                             # (w, C, k)
            positions = o.max_characters_per_token - width + 1
            s = torch.stack([sum((emb[:, p + a] @ kern[a] for a in range(1, width)), emb[:, p] @ kern[0])
                             for p in range(positions)], 1) + w[f"CNN/b_cnn_{i}"]
            y = s.max(dim=1).values
            feats.append(torch.relu(y) if o.activation == "relu" else torch.tanh(y))
        x = torch.cat(feats, 1)
        for h in range(o.n_highway):
            g = torch.sigmoid(x @ w[f"CNN_high_{h}/W_carry"] + w[f"CNN_high_{h}/b_carry"])
            t = torch.relu(x @ w[f"CNN_high_{h}/W_transform"] + w[f"CNN_high_{h}/b_transform"])
            x = g * t + (1 - g) * x
        if o.has_token_projection:
            x = x @ w["CNN_proj/W_proj"] + w["CNN_proj/b_proj"]
        return x

    def _direction(self, xs: List[torch.Tensor], d: int) -> List[List[torch.Tensor]]:
        o, w = self.opts, self.w
        outs = []
        inp = xs
        for layer in range(o.n_layers):
            pre = f"RNN_{d}/RNN/MultiRNNCell/Cell{layer}/LSTMCell/"
            w0, b = w[pre + "W_0"], w[pre + "B"]
            dd = o.lstm_dim
            c = torch.zeros(dd)
            h = torch.zeros(o.output_dim)
            layer_out = []
            for x in inp:
                z = torch.cat([x, h]) @ w0 + b
                i, j, f, og = z[:dd], z[dd:2 * dd], z[2 * dd:3 * dd], z[3 * dd:]
                c = torch.sigmoid(f + 1.0) * c + torch.sigmoid(i) * torch.tanh(j)
                if o.cell_clip is not None:
                    c = c.clamp(-o.cell_clip, o.cell_clip)
                m = torch.sigmoid(og) * torch.tanh(c)
                if o.has_lstm_projection:
                    h = m @ w[pre + "W_P_0"]
                    if o.proj_clip is not None:
                        h = h.clamp(-o.proj_clip, o.proj_clip)
                else:
                    h = m
                out = h + x if (o.use_skip_connections and layer > 0) else h
                layer_out.append(out)
            outs.append(layer_out)
            inp = layer_out
        return outs

    @torch.no_grad()
    def embed(self, tokens: Sequence[str]) -> np.ndarray:
        framed = [BOS_TOKEN, *tokens, EOS_TOKEN]
        tok = self.token_layer(framed)
        xs = list(tok)
        fwd = self._direction(xs, 0)
        bwd = [list(reversed(layer)) for layer in self._direction(xs[::-1], 1)]
        layers = [torch.cat([tok, tok], 1)]
        for f_l, b_l in zip(fwd, bwd):
            layers.append(torch.cat([torch.stack(f_l), torch.stack(b_l)], 1))
        return torch.stack(layers)[:, 1:-1].numpy()
