"""The ELMo biLM in PyTorch: char-CNN → highway → projection → L×(forward, backward) LSTM.

Follows ``docs/checkpoint-format.md`` §6–§9 exactly. Parameters are stored in the published
layout (TensorFlow conventions: ``x @ W``, LSTM gate blocks ordered i, j, f, o, forget bias +1 added
at run time), so loading and exporting are plain copies. The same module is used for inference
(``torch.no_grad``) and for training (:mod:`elmo_engine.train`): every operation is
autograd-safe.

The parts: :mod:`.char_cnn` (the token layer), :mod:`.lstm` (the biLSTM and its autograd path),
:mod:`.lstm_packed` (the inference path) and :mod:`.cpu_fast` (the CPU fast path and its
switches, :class:`~elmo_engine.model.cpu_fast.FastPath`). Speed (see
``benchmarks/bench_bilm.py``), all exact up to float rounding:

- token layer: once per distinct word type; the convolutions pool only the windows that touch the
  word plus one window of pure padding (all such windows are equal), as one GEMM per chunk of
  words of similar length;
- LSTM inputs: layer 0's input projection once per distinct token vector, every other layer's for
  all steps in one GEMM; no ``h @ W_rec`` at the first step from a zero state;
- rows sorted by length and packed time-major, so no GEMM touches padding; each step works in
  preallocated buffers, but for the output of the packed recurrent GEMM;
- the forward and backward LMs share nothing but their input: on the CPU they run side by side
  in two threads for batches of ``FastPath.parallel_min_rows`` rows or more, one after the other
  with every core for a single sentence (bound by streaming the weights);
- on the CPU, GEMMs of a few rows (every step's recurrent GEMM, the input projections of
  short inputs) use weights pre-packed once into oneDNN's GEMM layout, instead of re-packing
  them at every call;
- when the caller drops the ``<S>``/``</S>`` positions, the forward step at ``</S>`` and the
  backward step at ``<S>`` are skipped (nothing else depends on them).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn

from elmo_engine.model.char_cnn import CharCNN
from elmo_engine.model.cpu_fast import FastPath
from elmo_engine.model.lstm import LSTMStack, LSTMState
from elmo_engine.model.options import BiLMOptions

if TYPE_CHECKING:                           # checkpoint imports this module
    from elmo_engine.model.header import CheckpointInfo

__all__ = ["BiLM", "CharCNN", "FastPath", "LSTMStack", "LSTMState", "reverse_index"]


def reverse_index(lengths: Tensor, steps: int) -> Tensor:
    """(B, T) index that reverses each row's first ``length`` positions and keeps the rest."""
    t = torch.arange(steps, device=lengths.device)[None, :]
    lens = lengths[:, None]
    return torch.where(t < lens, lens - 1 - t, t)


class BiLM(nn.Module):
    """The full biLM. Input: char ids of framed sentences; output: the L+1 layers (§9)."""

    #: where the weights came from; set by :func:`~elmo_engine.model.checkpoint.load_checkpoint`
    info: "CheckpointInfo"

    def __init__(self, opts: BiLMOptions, fast: FastPath = FastPath()):
        super().__init__()
        self.opts = opts
        self.char_cnn = CharCNN(opts)
        self.lstm = LSTMStack(opts, fast)

    @property
    def fast_path(self) -> FastPath:
        """The switches of the CPU fast path (:class:`~elmo_engine.model.cpu_fast.FastPath`);
        assign a new one (e.g. ``dataclasses.replace(model.fast_path, packed_weights=False)``)
        to change them for this model."""
        return self.lstm.kernels.config

    @fast_path.setter
    def fast_path(self, config: FastPath) -> None:
        self.lstm.kernels.config = config

    @property
    def device(self) -> torch.device:
        return self.lstm.w_in[0].device

    @property
    def dtype(self) -> torch.dtype:
        return self.lstm.w_in[0].dtype

    def token_vectors(self, char_ids: Tensor) -> Tensor:
        """(n, M) ids → (n, P) context-free token vectors."""
        return self.char_cnn(char_ids)

    def contextual(self, tok: Tensor, lengths: Tensor, state: Optional[LSTMState] = None,
                   boundaries: bool = True) -> Tuple[Tensor, Optional[LSTMState]]:
        """Run the biLSTM over framed sequences.

        Parameters
        ----------
        tok : (B, T, P) token vectors of framed sentences (``<S>`` … ``</S>``), any padding after
        lengths : (B,) int64, each row's framed length (n + 2)
        state : initial state per layer, rows in the same order as ``tok``; zeros if None
        boundaries : False when the caller drops the ``<S>`` and ``</S>`` positions (inference
            only): nothing depends on the forward LM's step at ``</S>`` nor on the backward
            LM's step at ``<S>``, so both are skipped (one step in every row and layer). The
            biLSTM layers at those two positions are then not meaningful, and no state is
            returned.

        Returns
        -------
        layers : (L+1, B, T, 2·out) float — layer 0 = [tok, tok], layer l+1 = [fwd_l, bwd_l];
            positions past a row's length are zero
        state : each row's state after its last valid step (same row order); None when
            ``boundaries`` is False
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
        rev = reverse_index(lens_sorted, steps)                       # (B, T)
        tok_b = tok_s.gather(1, rev[:, :, None].expand_as(tok_s))
        inference = not torch.is_grad_enabled()
        skip = 0 if boundaries or not inference else 1                # steps dropped per row
        run = [max(0, ln - skip) for ln in lens_sorted.tolist()]
        n_active = [sum(1 for ln in run if ln > t) for t in range(steps - skip)]
        x = torch.stack([tok_s[:, :steps - skip], tok_b[:, :steps - skip]])  # (2, B, T', P)
        if inference:
            layers, state_out = self._contextual_packed(tok, x, n_active, state_s, order, inv,
                                                        rev, lengths)
            return layers, (state_out if boundaries else None)
        outs, new_state = self.lstm(x, n_active, state_s)
        mask = (torch.arange(steps, device=tok.device)[None, :] < lens_sorted[:, None])
        mask = mask.to(tok.dtype)[:, :, None]                         # (B, T, 1)
        per_layer = [torch.cat([tok_s, tok_s], -1) * mask]
        for out in outs:
            fwd = out[0]
            bwd = out[1].gather(1, rev[:, :, None].expand_as(out[1]))  # back to original order
            per_layer.append(torch.cat([fwd, bwd], -1))
        stacked = torch.stack(per_layer)[:, inv]                         # (L+1, B, T, 2·out)
        state_out = [(c[:, inv], h[:, inv]) for c, h in new_state]
        return stacked, state_out

    def _contextual_packed(self, tok: Tensor, x: Tensor, n_active: Sequence[int],
                           state_s: LSTMState, order: Tensor, inv: Tensor, rev: Tensor,
                           lengths: Tensor) -> Tuple[Tensor, LSTMState]:
        """Inference: every packed output row is copied once, straight to its place in the
        result (rows in the caller's order, backward outputs back in forward time). ``x`` may
        be a step shorter than ``tok`` (see ``boundaries`` in :meth:`contextual`)."""
        bsz, steps, p = tok.shape
        packed, new_state, pos = self.lstm.run_packed(x, n_active, state_s)
        out_dim = self.opts.output_dim
        layers = tok.new_zeros(self.opts.n_layers + 1, bsz * steps, 2 * out_dim)
        mask = (torch.arange(steps, device=tok.device)[None, :] < lengths[:, None])
        tok_masked = (tok * mask.to(tok.dtype)[:, :, None]).reshape(bsz * steps, p)
        layers[0, :, :p] = tok_masked
        layers[0, :, p:] = tok_masked
        t, r = pos // bsz, pos % bsz                                  # sorted row r at step t
        base = order[r] * steps
        to_fwd = base + t
        to_bwd = base + rev[r, t]
        for layer, out in enumerate(packed, start=1):
            layers[layer, :, :out_dim].index_copy_(0, to_fwd, out[0])
            layers[layer, :, out_dim:].index_copy_(0, to_bwd, out[1])
        state_out = [(c[:, inv], h[:, inv]) for c, h in new_state]
        return layers.view(-1, bsz, steps, 2 * out_dim), state_out

    def forward(self, char_ids: Tensor, state: Optional[LSTMState] = None
                ) -> Tuple[Tensor, Tensor, Optional[LSTMState]]:
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
            "token_projection": 0 if cc.w_proj is None or cc.b_proj is None else cc.w_proj.numel() + cc.b_proj.numel(),
            "lstm": sum(p.numel() for p in self.lstm.parameters()),
        }
        counts["total"] = sum(counts.values())
        return counts
