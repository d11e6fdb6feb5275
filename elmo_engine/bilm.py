"""The ELMo biLM in PyTorch: char-CNN → highway → projection → L×(forward, backward) LSTM.

Follows ``docs/elmo-checkpoint-format.md`` §6–§9 exactly. Parameters are stored in the published
layout (TensorFlow conventions: ``x @ W``, LSTM gate blocks ordered i, j, f, o, forget bias +1 added
at run time), so loading and exporting are plain copies. The same module is used for inference
(``torch.no_grad``) and for training (:mod:`elmo_engine.lm_train`): every operation is
autograd-safe.

Speed (see ``benchmarks/bench_bilm.py``): the input half of every LSTM kernel is applied to all
time steps in one GEMM; both directions advance together in one batched matmul per step; rows are
sorted by length so that a step only computes the rows still running (no padding waste); the
token layer is computed once per distinct word type.
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from elmo_engine.options import BiLMOptions

# (c, h) per layer; each of shape (2 directions, B, D) and (2, B, P)
LSTMState = List[Tuple[Tensor, Tensor]]


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
        emb = F.embedding(char_ids, table).transpose(1, 2)            # (n, C, M)
        act = torch.relu if self.opts.activation == "relu" else torch.tanh
        pooled = []
        for w, b in zip(self.conv_w, self.conv_b):
            # file kernel (1, w, C, k) → conv1d weight (k, C, w); cross-correlation, no flip
            kernel = w[0].permute(2, 1, 0)
            y = F.conv1d(emb, kernel, b)                              # (n, k, M-w+1)
            pooled.append(act(y.amax(dim=2)))                         # (n, k)
        x = torch.cat(pooled, 1)                                      # (n, N)
        for wc, bc, wt, bt in zip(self.w_carry, self.b_carry, self.w_transform, self.b_transform):
            g = torch.sigmoid(torch.addmm(bc, x, wc))
            t = torch.relu(torch.addmm(bt, x, wt))
            x = g * t + (1.0 - g) * x
        if self.w_proj is not None:
            x = torch.addmm(self.b_proj, x, self.w_proj)              # (n, P)
        return x


class LSTMStack(nn.Module):
    """L layers of TensorFlow ``LSTMCell`` with projection, for both directions at once (§7)."""

    def __init__(self, opts: BiLMOptions):
        super().__init__()
        self.opts = opts
        d, p, out = opts.lstm_dim, opts.projection_dim, opts.output_dim
        # per layer, forward (RNN_0) and backward (RNN_1) stacked on axis 0. The file's W_0 is
        # [w_in; w_rec] along its rows: see :meth:`file_tensor`.
        self.w_in = nn.ParameterList()
        self.w_rec = nn.ParameterList()
        self.b = nn.ParameterList()
        self.wp = nn.ParameterList()
        for layer in range(opts.n_layers):
            in_dim = p if layer == 0 else out
            self.w_in.append(nn.Parameter(torch.zeros(2, in_dim, 4 * d)))
            self.w_rec.append(nn.Parameter(torch.zeros(2, out, 4 * d)))
            self.b.append(nn.Parameter(torch.zeros(2, 4 * d)))
            if opts.has_lstm_projection:
                self.wp.append(nn.Parameter(torch.zeros(2, d, p)))
        forget = torch.zeros(1, 4 * d)
        forget[:, 2 * d:3 * d] = 1.0                                  # TF's forget_bias=1.0
        self.register_buffer("forget_bias", forget, persistent=False)

    def zero_state(self, batch: int, device=None, dtype=None) -> LSTMState:
        d, out = self.opts.lstm_dim, self.opts.output_dim
        ref = self.w_in[0]
        device = device or ref.device
        dtype = dtype or ref.dtype
        return [(torch.zeros(2, batch, d, device=device, dtype=dtype),
                 torch.zeros(2, batch, out, device=device, dtype=dtype))
                for _ in range(self.opts.n_layers)]

    def forward(self, x: Tensor, n_active: Sequence[int], state: LSTMState
                ) -> Tuple[List[Tensor], LSTMState]:
        """Run all layers.

        Parameters
        ----------
        x : (2, B, T, P) token vectors; [0] in forward order, [1] each row reversed in place over
            its valid length (so both directions read their sequence from index 0).
        n_active : for each step t, how many rows (a prefix, rows sorted by length descending)
            are still running. Rows stop updating their state once past their length.
        state : initial (c, h) per layer.

        Returns
        -------
        outputs : per layer (2, B, T, out), zero where a row has ended
        state : the state of each row after its last valid step
        """
        if not torch.is_grad_enabled():
            return self._forward_packed(x, n_active, state)
        opts = self.opts
        _, bsz, steps, _ = x.shape
        outputs: List[Tensor] = []
        new_state: LSTMState = []
        layer_in = x.transpose(1, 2)                                  # (2, T, B, P) time-major
        for layer in range(opts.n_layers):
            bias = (self.b[layer] + self.forget_bias).unsqueeze(1)    # (2, 1, 4D)
            # input projection of every step in one GEMM: (2, T*B, in) @ (2, in, 4D)
            flat = layer_in.reshape(2, steps * bsz, -1)
            xp = torch.baddbmm(bias, flat, self.w_in[layer]).reshape(2, steps, bsz, -1)
            out, c, h = self._run_autograd(layer, xp, n_active, state[layer])  # (2, T, B, out)
            if opts.use_skip_connections and layer > 0:
                out = out + layer_in
            outputs.append(out.transpose(1, 2))                       # (2, B, T, out)
            new_state.append((c, h))
            layer_in = out
        return outputs, new_state

    def _forward_packed(self, x: Tensor, n_active: Sequence[int], state: LSTMState
                        ) -> Tuple[List[Tensor], LSTMState]:
        """Inference path. Sequences are packed time-major (step t holds its n_t running rows),
        so no GEMM touches padding; every step works in place in preallocated memory."""
        opts = self.opts
        d = opts.lstm_dim
        _, bsz, steps, _ = x.shape
        offsets = [0]
        for n in n_active:
            offsets.append(offsets[-1] + n)
        total = offsets[-1]
        # packed position k = (t, r) with r < n_t  →  index t*B + r of the time-major layout
        pos = torch.cat([torch.arange(n, device=x.device) + t * bsz
                         for t, n in enumerate(n_active) if n]) if total else \
            torch.zeros(0, dtype=torch.long, device=x.device)
        layer_in = x.transpose(1, 2).reshape(2, steps * bsz, -1)[:, pos]  # (2, total, P)
        outputs: List[Tensor] = []
        new_state: LSTMState = []
        for layer in range(opts.n_layers):
            w_rec = self.w_rec[layer]
            wp = self.wp[layer] if opts.has_lstm_projection else None
            bias = (self.b[layer] + self.forget_bias).unsqueeze(1)    # (2, 1, 4D)
            xp = self._scratch(2 * total * 4 * d, layer_in).view(2, total, 4 * d)
            torch.bmm(layer_in, self.w_in[layer], out=xp)             # (2, total, 4D)
            xp += bias
            c = state[layer][0].clone()
            h = state[layer][1].clone()
            out_dim = h.shape[-1]
            out = xp.new_empty(2, total, out_dim)
            tj_buf = xp.new_empty(2 * bsz * d)
            m_buf = xp.new_empty(2 * bsz * d)
            for t in range(steps):
                n = n_active[t]
                if n == 0:
                    continue
                z = xp[:, offsets[t]:offsets[t + 1]]                  # (2, n, 4D): i j f o
                z.baddbmm_(h[:, :n], w_rec)
                tj = torch.tanh(z[..., d:2 * d], out=tj_buf[:2 * n * d].view(2, n, d))
                z.sigmoid_()
                c_n = c[:, :n]
                c_n.mul_(z[..., 2 * d:3 * d]).addcmul_(z[..., :d], tj)  # σ(f)c + σ(i)tanh(j)
                if opts.cell_clip is not None:
                    c_n.clamp_(-opts.cell_clip, opts.cell_clip)
                m = torch.tanh(c_n, out=m_buf[:2 * n * d].view(2, n, d)).mul_(z[..., 3 * d:])
                h_t = out[:, offsets[t]:offsets[t + 1]]               # (2, n, out)
                if wp is not None:
                    torch.bmm(m, wp, out=h_t)
                    if opts.proj_clip is not None:
                        h_t.clamp_(-opts.proj_clip, opts.proj_clip)
                else:
                    h_t.copy_(m)
                h[:, :n] = h_t
            if opts.use_skip_connections and layer > 0:
                out += layer_in
            padded = out.new_zeros(2, steps * bsz, out_dim)
            padded[:, pos] = out
            outputs.append(padded.view(2, steps, bsz, out_dim).transpose(1, 2))  # (2, B, T, out)
            new_state.append((c, h))
            layer_in = out
        if self._scratch_buf.numel() * self._scratch_buf.element_size() > (512 << 20):
            self._scratch_buf = None                 # do not hold on to a huge one-off buffer
        return outputs, new_state

    def _scratch(self, numel: int, like: Tensor) -> Tensor:
        """A reusable buffer for the input projections: a fresh multi-hundred-MB allocation per
        call costs more in page faults than its GEMM saves (measured on the full model)."""
        buf = getattr(self, "_scratch_buf", None)
        if buf is None or buf.numel() < numel or buf.device != like.device or buf.dtype != like.dtype:
            self._scratch_buf = None
            buf = self._scratch_buf = like.new_empty(numel)
        return buf[:numel]

    def _run_autograd(self, layer: int, xp: Tensor, n_active: Sequence[int], state):
        """Training: the same computation with out-of-place ops only."""
        opts = self.opts
        w_rec = self.w_rec[layer]
        wp = self.wp[layer] if opts.has_lstm_projection else None
        _, steps, bsz, _ = xp.shape
        c, h = state
        hs: List[Tensor] = []
        for t in range(steps):
            n = n_active[t]
            z = torch.baddbmm(xp[:, t, :n], h[:, :n], w_rec)          # (2, n, 4D)
            i, j, f, o = z.chunk(4, dim=2)
            c_new = torch.sigmoid(f) * c[:, :n] + torch.sigmoid(i) * torch.tanh(j)
            if opts.cell_clip is not None:
                c_new = c_new.clamp(-opts.cell_clip, opts.cell_clip)
            m = torch.sigmoid(o) * torch.tanh(c_new)                  # (2, n, D)
            if wp is not None:
                h_new = torch.bmm(m, wp)                              # (2, n, P)
                if opts.proj_clip is not None:
                    h_new = h_new.clamp(-opts.proj_clip, opts.proj_clip)
            else:
                h_new = m
            if n == bsz:
                c, h = c_new, h_new
            else:
                c = torch.cat([c_new, c[:, n:]], 1)
                h = torch.cat([h_new, h[:, n:]], 1)
            hs.append(h_new if n == bsz else F.pad(h_new, (0, 0, 0, bsz - n)))
        return torch.stack(hs, dim=1), c, h                           # (2, T, B, out)


def reverse_index(lengths: Tensor, steps: int) -> Tensor:
    """(B, T) index that reverses each row's first ``length`` positions and keeps the rest."""
    t = torch.arange(steps, device=lengths.device)[None, :]
    lens = lengths[:, None]
    return torch.where(t < lens, lens - 1 - t, t)


class BiLM(nn.Module):
    """The full biLM. Input: char ids of framed sentences; output: the L+1 layers (§9)."""

    def __init__(self, opts: BiLMOptions):
        super().__init__()
        self.opts = opts
        self.char_cnn = CharCNN(opts)
        self.lstm = LSTMStack(opts)

    @property
    def device(self) -> torch.device:
        return self.lstm.w_in[0].device

    @property
    def dtype(self) -> torch.dtype:
        return self.lstm.w_in[0].dtype

    def token_vectors(self, char_ids: Tensor) -> Tensor:
        """(n, M) ids → (n, P) context-free token vectors."""
        return self.char_cnn(char_ids)

    def contextual(self, tok: Tensor, lengths: Tensor, state: Optional[LSTMState] = None
                   ) -> Tuple[Tensor, LSTMState]:
        """Run the biLSTM over framed sequences.

        Parameters
        ----------
        tok : (B, T, P) token vectors of framed sentences (``<S>`` … ``</S>``), any padding after
        lengths : (B,) int64, each row's framed length (n + 2)
        state : initial state per layer, rows in the same order as ``tok``; zeros if None

        Returns
        -------
        layers : (L+1, B, T, 2·out) float — layer 0 = [tok, tok], layer l+1 = [fwd_l, bwd_l];
            positions past a row's length are zero
        state : each row's state after its last valid step (same row order)
        """
        bsz, steps, _ = tok.shape
        if state is None:
            state = self.lstm.zero_state(bsz, tok.device, tok.dtype)
        lengths = lengths.to(tok.device)
        # sort rows by length (descending) so that running rows form a prefix at every step
        order = torch.argsort(lengths, descending=True, stable=True)
        inv = torch.argsort(order)
        lens_sorted = lengths[order]
        tok_s = tok[order]
        state_s = [(c[:, order], h[:, order]) for c, h in state]
        lens_list = lens_sorted.tolist()
        n_active = [sum(1 for ln in lens_list if ln > t) for t in range(steps)]
        rev = reverse_index(lens_sorted, steps)                       # (B, T)
        tok_b = tok_s.gather(1, rev[:, :, None].expand_as(tok_s))
        x = torch.stack([tok_s, tok_b])                               # (2, B, T, P)
        outs, new_state = self.lstm(x, n_active, state_s)
        mask = (torch.arange(steps, device=tok.device)[None, :] < lens_sorted[:, None])
        mask = mask.to(tok.dtype)[:, :, None]                         # (B, T, 1)
        layers = [torch.cat([tok_s, tok_s], -1) * mask]
        for out in outs:
            fwd = out[0]
            bwd = out[1].gather(1, rev[:, :, None].expand_as(out[1]))  # back to original order
            layers.append(torch.cat([fwd, bwd], -1))
        stacked = torch.stack(layers)[:, inv]                         # (L+1, B, T, 2·out)
        state_out = [(c[:, inv], h[:, inv]) for c, h in new_state]
        return stacked, state_out

    def forward(self, char_ids: Tensor, state: Optional[LSTMState] = None
                ) -> Tuple[Tensor, Tensor, LSTMState]:
        """(B, T, M) framed char ids → (layers (L+1, B, T, 2·out), mask (B, T), state)."""
        bsz, steps, m = char_ids.shape
        mask = (char_ids > 0).any(-1)                                 # (B, T)
        flat = char_ids.reshape(-1, m)
        uniq, inverse = torch.unique(flat, dim=0, return_inverse=True)
        tok = self.token_vectors(uniq)[inverse].reshape(bsz, steps, -1)
        lengths = mask.sum(1)
        layers, state = self.contextual(tok, lengths, state)
        return layers, mask, state

    def parameter_counts(self) -> dict:
        """Parameters per part: char embedding, CNN, highway, projection, LSTM."""
        cc = self.char_cnn
        counts = {
            "char_embedding": cc.char_embed.numel(),
            "convolutions": sum(p.numel() for p in cc.conv_w) + sum(p.numel() for p in cc.conv_b),
            "highway": sum(p.numel() for group in (cc.w_carry, cc.b_carry, cc.w_transform,
                                                     cc.b_transform) for p in group),
            "token_projection": 0 if cc.w_proj is None else cc.w_proj.numel() + cc.b_proj.numel(),
            "lstm": sum(p.numel() for p in self.lstm.parameters()),
        }
        counts["total"] = sum(counts.values())
        return counts
