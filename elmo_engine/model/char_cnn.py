"""The biLM's token layer: character embeddings, convolutions with max-pooling, highway layers
and the projection (docs/checkpoint-format.md §6), computed once per word type.

A window that holds only a word's trailing padding gives the same value wherever it sits, so the
max-pool needs only the windows that touch the word plus one window of pure padding; all filter
banks run as one GEMM over those windows, on chunks of words of similar length. Exact up to
float rounding against the plain convolution (tests/engine/test_bilm_fast_paths.py).
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from elmo_engine.model.options import BiLMOptions


class CharCNN(nn.Module):
    """Token layer: character embeddings, convolutions + max-pool, highway, projection (§6)."""

    def __init__(self, opts: BiLMOptions):
        super().__init__()
        self.opts = opts
        c, n = opts.char_embed_dim, opts.n_filters
        # 261 stored rows; row 0 of the (262, C) lookup table is the zero padding row.
        self.char_embed = nn.Parameter(torch.zeros(261, c))
        self.conv_w = nn.ParameterList(
            [nn.Parameter(torch.zeros(1, w, c, k)) for w, k in opts.filters])
        self.conv_b = nn.ParameterList([nn.Parameter(torch.zeros(k)) for _, k in opts.filters])
        self.w_carry = nn.ParameterList([nn.Parameter(torch.zeros(n, n))
                                         for _ in range(opts.n_highway)])
        self.b_carry = nn.ParameterList([nn.Parameter(torch.zeros(n))
                                         for _ in range(opts.n_highway)])
        self.w_transform = nn.ParameterList([nn.Parameter(torch.zeros(n, n))
                                             for _ in range(opts.n_highway)])
        self.b_transform = nn.ParameterList([nn.Parameter(torch.zeros(n))
                                             for _ in range(opts.n_highway)])
        self.w_proj: Optional[nn.Parameter]
        self.b_proj: Optional[nn.Parameter]
        if opts.has_token_projection:
            self.w_proj = nn.Parameter(torch.zeros(n, opts.projection_dim))
            self.b_proj = nn.Parameter(torch.zeros(opts.projection_dim))
        else:
            self.w_proj = None
            self.b_proj = None

    def forward(self, char_ids: Tensor) -> Tensor:
        """``char_ids`` (n, M) int64 → token vectors (n, P)."""
        table = torch.cat([self.char_embed.new_zeros(1, self.char_embed.shape[1]),
                           self.char_embed], 0)                       # (262, C)
        n, m = char_ids.shape
        # A window that holds only a row's trailing padding gives the same value wherever it
        # sits, so the max over positions needs the windows that touch the word plus one of
        # those: the first `used + widest` characters of a row whose last non-padding character
        # is at `used - 1`. Rows are sorted by that length and pooled in chunks, each cut to its
        # longest row (a typical word needs ~20 of the 50 positions).
        positions = torch.arange(1, m + 1, device=char_ids.device)
        used = ((char_ids != char_ids[:, -1:]) * positions).amax(1) if n else positions[:0]
        order = torch.argsort(used)
        lengths = used[order].tolist()
        widest = max(w for w, _ in self.opts.filters)
        kernel = self._kernel(widest)                                 # (widest·C, N)
        bias = torch.cat(list(self.conv_b))
        parts = []
        for start in range(0, n, self.CHUNK):
            rows = order[start:start + self.CHUNK]
            span = min(m, lengths[min(start + self.CHUNK, n) - 1] + widest)
            parts.append(self._pool(F.embedding(char_ids[rows, :span], table), kernel, span))
        pooled = torch.cat(parts) if parts else table.new_zeros(0, kernel.shape[1])
        pooled = pooled[torch.argsort(order)] + bias
        x = torch.relu(pooled) if self.opts.activation == "relu" else torch.tanh(pooled)
        for wc, bc, wt, bt in zip(self.w_carry, self.b_carry, self.w_transform, self.b_transform):
            g = torch.sigmoid(torch.addmm(bc, x, wc))
            t = torch.relu(torch.addmm(bt, x, wt))
            x = g * t + (1.0 - g) * x
        if self.w_proj is not None and self.b_proj is not None:
            x = torch.addmm(self.b_proj, x, self.w_proj)              # (n, P)
        return x

    CHUNK = 128   # rows pooled at once: their conv outputs stay in the last-level cache

    def _kernel(self, widest: int) -> Tensor:
        """Every filter bank as one (widest·C, N) matrix, narrower kernels padded with zeros:
        the convolutions become one GEMM over windows of ``widest`` characters."""
        c = self.opts.char_embed_dim
        blocks = []
        for w in self.conv_w:                                         # file layout (1, w, C, k)
            width, k = w.shape[1], w.shape[3]
            block = w[0].reshape(width * c, k)                        # row index = i·C + channel
            blocks.append(F.pad(block, (0, 0, 0, (widest - width) * c)))
        return torch.cat(blocks, 1)

    def _pool(self, emb: Tensor, kernel: Tensor, span: int) -> Tensor:
        """Max over positions of every filter (cross-correlation, no flip), before the bias.

        ``emb`` (r, span, C): the first ``span`` characters of r rows. A filter of width w has
        ``span - w + 1`` valid positions; the windows past them read zero padding and are left
        out of its max."""
        r, _, c = emb.shape
        widest = kernel.shape[0] // c
        padded = F.pad(emb, (0, 0, 0, widest - 1))                    # (r, span+widest-1, C)
        windows = padded.unfold(1, widest, 1).transpose(2, 3)         # (r, span, widest, C)
        y = (windows.reshape(r * span, widest * c) @ kernel).view(r, span, -1)
        pooled = []
        col = 0
        for width, k in self.opts.filters:
            pooled.append(y[:, :span - width + 1, col:col + k].amax(1))
            col += k
        return torch.cat(pooled, 1)
