"""The biLM's recurrent part: L layers of TensorFlow ``LSTMCell`` with projection, forward and
backward (docs/checkpoint-format.md §7).

Parameters are kept in the published layout (``x @ W``, gate blocks ordered i, j, f, o, the
forget bias +1 added at run time). Two paths compute the same thing: with grad on, out-of-place
ops that autograd can train through (:meth:`LSTMStack.forward`); for inference, sequences packed
time-major (:mod:`elmo_engine.model.lstm_packed`) with the CPU fast path
(:mod:`elmo_engine.model.cpu_fast`), or on a GPU the step loop as CUDA graphs per shape bucket
(:mod:`elmo_engine.model.lstm_graphs`).
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from elmo_engine.model.cpu_fast import FastKernels, FastPath
from elmo_engine.model.lstm_graphs import GraphRunner
from elmo_engine.model.lstm_packed import run_packed
from elmo_engine.model.options import BiLMOptions

# (c, h) per layer; each of shape (2 directions, B, D) and (2, B, P)
LSTMState = List[Tuple[Tensor, Tensor]]


class LSTMStack(nn.Module):
    """L layers of TensorFlow ``LSTMCell`` with projection, forward and backward (§7)."""

    def __init__(self, opts: BiLMOptions, fast: FastPath = FastPath()):
        super().__init__()
        self.opts = opts
        self.kernels = FastKernels(fast)      # the CPU fast path: switches, packed weights
        #: the bucketed step loop (CUDA graphs on a GPU) instead of the packed path; None: off
        self.graphs: Optional[GraphRunner] = None
        d, p, out = opts.lstm_dim, opts.projection_dim, opts.output_dim
        # per layer, forward (RNN_0) and backward (RNN_1) stacked on axis 0. The file's W_0 is
        # [w_in; w_rec] along its rows: see elmo_engine.model.layout.
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
        self.forget_bias: Tensor
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

    def run_packed(self, x: Tensor, n_active: Sequence[int], state: LSTMState
                   ) -> Tuple[List[Tensor], LSTMState, Tensor]:
        """Inference over sequences packed time-major (:func:`.lstm_packed.run_packed`), or,
        when :attr:`graphs` is set, the bucketed loop (:meth:`.lstm_graphs.GraphRunner.run`:
        CUDA graphs on a GPU, the same loop eagerly elsewhere), with the same results."""
        if self.graphs is not None:
            return self.graphs.run(self, x, n_active, state)
        return run_packed(self, x, n_active, state)

    def drop_packed(self) -> None:
        """Free the packed copies of the weights (they are rebuilt when next needed)."""
        self.kernels.drop_packed()

    def _forward_packed(self, x: Tensor, n_active: Sequence[int], state: LSTMState
                        ) -> Tuple[List[Tensor], LSTMState]:
        """Inference path: :meth:`run_packed`, its outputs put back in the (2, B, T, out) layout."""
        _, bsz, steps, _ = x.shape
        packed, new_state, pos = self.run_packed(x, n_active, state)
        outputs: List[Tensor] = []
        for out in packed:
            padded = out.new_zeros(2, steps * bsz, out.shape[-1])
            padded[:, pos] = out
            outputs.append(padded.view(2, steps, bsz, -1).transpose(1, 2))  # (2, B, T, out)
        return outputs, new_state

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
