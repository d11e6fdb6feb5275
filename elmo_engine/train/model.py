"""The bidirectional language model trained on top of :class:`elmo_engine.model.bilm.BiLM`.

A forward and a backward LM share the token layer (char-CNN, highway, projection) and the softmax
``(V, P)``, as in bilm-tf (format doc §14); each has its own LSTM stack (``RNN_0`` / ``RNN_1``).
The forward output at position *t* predicts token *t+1* of the forward reading order, the backward
output predicts token *t+1* of the reversed reading order (the previous token in the text).

Training uses a sampled softmax with negatives shared by the whole batch, drawn from the
log-uniform (Zipfian) distribution over the frequency-sorted vocabulary and corrected by the log
of their expected count, with accidental hits removed (TensorFlow's ``sampled_softmax_loss``).
Evaluation uses the full softmax.
"""
from __future__ import annotations

import math
from typing import Optional, Tuple

import torch
from torch import Tensor, nn

from elmo_engine.model.bilm import BiLM, LSTMState
from elmo_engine.train.fused_lstm import fused_lstm_stack
from elmo_engine.model.options import BiLMOptions


#: under bf16 autocast on the CPU, the rows of the per-type GEMMs (the token layer, layer 0's input
#: projection) and the sampled softmax's negatives are padded to a multiple of this. Their
#: counts change every window (the distinct word types, the distinct negatives drawn), and
#: oneDNN builds and JIT-compiles a kernel for every new shape of a bf16 GEMM (float32 runs
#: MKL's, which need none): rounded up, the shapes repeat and come from its primitive cache
#: (docs/performance.md, "The trainer's buffers"). The padded rows are never read.
SHAPE_BUCKET = 16


def _bucketed(n: int) -> int:
    return -(-n // SHAPE_BUCKET) * SHAPE_BUCKET


def _buckets(device: torch.device) -> bool:
    """Whether the shapes are bucketed: under autocast on the CPU (oneDNN); a GPU's GEMMs need
    no kernel per shape."""
    return device.type == "cpu" and torch.is_autocast_enabled("cpu")


class BiLanguageModel(nn.Module):
    """BiLM + shared softmax.

    Parameters
    ----------
    opts : the biLM architecture
    vocab_size : V, rows of the softmax
    """

    def __init__(self, opts: BiLMOptions, vocab_size: int, fused: bool = True):
        super().__init__()
        self.opts = opts
        # True: the LSTM layers run as one hand-differentiated function per layer
        # (:mod:`elmo_engine.train.fused_lstm`); False: the biLM's autograd path
        self.fused = fused
        self.vocab_size = vocab_size
        self.bilm = BiLM(opts)
        p = opts.output_dim
        self.softmax_w = nn.Parameter(torch.zeros(vocab_size, p))
        self.softmax_b = nn.Parameter(torch.zeros(vocab_size))

    # ---- initialisation (bilm-tf's initializers) ---------------------------------------------
    @torch.no_grad()
    def reset_parameters(self, generator: torch.Generator) -> None:
        """Initialise every weight from ``generator`` (deterministic for a seed)."""
        opts, cc, ls = self.opts, self.bilm.char_cnn, self.bilm.lstm
        g = generator

        def normal_(t: Tensor, std: float) -> None:
            t.copy_(torch.randn(t.shape, generator=g) * std)

        def uniform_(t: Tensor, limit: float) -> None:
            t.copy_((torch.rand(t.shape, generator=g) * 2 - 1) * limit)

        uniform_(cc.char_embed, 1.0)
        c = opts.char_embed_dim
        for (w, _), cw, cb in zip(opts.filters, cc.conv_w, cc.conv_b):
            std = math.sqrt(1.0 / (w * c)) if opts.activation == "relu" else 0.05
            normal_(cw, std)
            cb.zero_()
        n = opts.n_filters
        for wc, bc, wt, bt in zip(cc.w_carry, cc.b_carry, cc.w_transform, cc.b_transform):
            normal_(wc, math.sqrt(1.0 / n))
            bc.fill_(-2.0)
            normal_(wt, math.sqrt(1.0 / n))
            bt.zero_()
        if cc.w_proj is not None and cc.b_proj is not None:
            normal_(cc.w_proj, math.sqrt(1.0 / n))
            cc.b_proj.zero_()
        d = opts.lstm_dim
        for layer in range(opts.n_layers):
            w_in, w_rec = ls.w_in[layer], ls.w_rec[layer]
            limit = math.sqrt(6.0 / (w_in.shape[1] + w_rec.shape[1] + 4 * d))  # glorot on W_0
            uniform_(w_in, limit)
            uniform_(w_rec, limit)
            ls.b[layer].zero_()
            if opts.has_lstm_projection:
                wp = ls.wp[layer]
                uniform_(wp, math.sqrt(6.0 / (wp.shape[1] + wp.shape[2])))
        normal_(self.softmax_w, 1.0 / math.sqrt(self.softmax_w.shape[1]))
        self.softmax_b.zero_()

    # ---- running the biLM over windows --------------------------------------------------------
    def token_layer(self, type_chars: Tensor, inputs: Tensor) -> Tensor:
        """``inputs`` (2, B, T) type ids → token vectors (2, B, T, P), one CNN pass per type."""
        uniq, inverse = torch.unique(inputs, return_inverse=True)
        tok = self.bilm.char_cnn(type_chars[uniq])                    # (u, P)
        return tok[inverse]                                           # (2, B, T, P)

    def top(self, type_chars: Tensor, inputs: Tensor, state: LSTMState,
            in_mask: Optional[Tensor] = None) -> Tuple[Tensor, LSTMState]:
        """Top-layer outputs (2, B, T, P) of both directions and the carried state."""
        if self.fused and torch.is_grad_enabled():
            return self._top_fused(type_chars, inputs, state, in_mask)
        x = self.token_layer(type_chars, inputs)                      # (2, B, T, P)
        if in_mask is not None:
            x = x * in_mask
        steps, bsz = inputs.shape[2], inputs.shape[1]
        outs, new_state = self.bilm.lstm(x, [bsz] * steps, state)
        # the carried state stays float32 under bf16 autocast too (.float() of float32 is a no-op)
        return outs[-1], [(c.float(), h.float()) for c, h in new_state]

    def _top_fused(self, type_chars: Tensor, inputs: Tensor, state: LSTMState,
                   in_mask: Optional[Tensor]) -> Tuple[Tensor, LSTMState]:
        """:meth:`top` through :func:`fused_lstm_stack`: layer 0's input projection per type
        (or per position, when an input dropout mask makes positions of a type differ)."""
        _, bsz, steps = inputs.shape
        uniq, inverse = torch.unique(inputs, return_inverse=True)
        if _buckets(inputs.device):                                    # U rounded up: repeats
            uniq = torch.cat([uniq, uniq[-1:].expand(_bucketed(len(uniq)) - len(uniq))])
        tok = self.bilm.char_cnn(type_chars[uniq])                    # (U, P)
        idx = inverse.transpose(1, 2).reshape(2, steps * bsz)        # time-major
        if in_mask is not None:
            mask = in_mask.transpose(1, 2).reshape(2, steps * bsz, -1)
            tok, idx = tok[idx] * mask, None                          # (2, T·B, P)
        outs, new_state = fused_lstm_stack(self.bilm.lstm, tok, idx, steps, state)
        top = outs[-1].view(2, steps, bsz, -1).transpose(1, 2)        # (2, B, T, P)
        return top, new_state

    def forward(self, type_chars: Tensor, inputs: Tensor, targets: Tensor, state: LSTMState,
                negatives: Tensor, neg_logq: Tensor, target_logq: Tensor,
                in_mask: Optional[Tensor] = None, out_mask: Optional[Tensor] = None
                ) -> Tuple[Tensor, LSTMState]:
        """Sampled-softmax loss of one window.

        Parameters
        ----------
        type_chars : (n_types, M) char ids of every type
        inputs : (2, B, T) type ids; targets : (2, B, T) softmax ids
        state : carried LSTM state (rows of this process)
        negatives : (K,) distinct softmax ids shared by the batch; neg_logq : (K,) log expected
            counts; target_logq : (2, B, T) log expected counts of the targets
        in_mask, out_mask : dropout masks (2, B, T, P), already scaled, or None

        Returns
        -------
        loss : (2,) mean negative log-likelihood per direction (of the sampled softmax)
        state : the new carried state (not detached)
        """
        h, new_state = self.top(type_chars, inputs, state, in_mask)   # (2, B, T, P)
        h = h.float()                   # under bf16 autocast: the loss is computed in float32
        if out_mask is not None:
            h = h * out_mask
        h = h.reshape(2, -1, h.shape[-1])                             # (2, N, P)
        y = targets.reshape(2, -1)                                    # (2, N)
        w_true = self.softmax_w[y]                                    # (2, N, P)
        true_logit = (h * w_true).sum(-1) + self.softmax_b[y] - target_logq.reshape(2, -1)
        w_neg = self.softmax_w[negatives]                             # (K, P)
        if torch.is_autocast_enabled(h.device.type):
            # mixed precision: the GEMM in the autocast type, its product and the rest float32;
            # the negatives' rows padded with zeros to a bucketed count (SHAPE_BUCKET)
            k = negatives.shape[0]
            pad = _bucketed(k) - k if _buckets(h.device) else 0
            w_pad = torch.nn.functional.pad(w_neg, (0, 0, 0, pad))
            neg_logit = torch.mm(h.reshape(-1, h.shape[-1]), w_pad.t())[:, :k].float().add_(
                self.softmax_b[negatives] - neg_logq).view(2, -1, k)
        else:
            neg_logit = torch.addmm(self.softmax_b[negatives] - neg_logq,
                                    h.reshape(-1, h.shape[-1]),
                                    w_neg.t()).view(2, -1, negatives.shape[0])   # (2, N, K)
        # accidental hits: a target among the (sorted, distinct) negatives scores -inf there
        k = negatives.shape[0]
        pos = torch.searchsorted(negatives, y).clamp_(max=k - 1)      # (2, N)
        hit = negatives[pos] == y
        if bool(hit.any()):
            d, r = hit.nonzero(as_tuple=True)
            neg_logit = neg_logit.index_put((d, r, pos[d, r]),
                                            neg_logit.new_tensor(float("-inf")))
        loss = torch.logaddexp(torch.logsumexp(neg_logit, -1), true_logit) - true_logit
        return loss.mean(1), new_state

    @torch.no_grad()
    def full_nll(self, type_chars: Tensor, inputs: Tensor, targets: Tensor, state: LSTMState,
                 chunk: int = 256) -> Tuple[Tensor, LSTMState]:
        """Summed full-softmax NLL per direction (2,) of one window, and the carried state.

        The logits are made ``chunk`` rows at a time into one reused buffer (a fresh
        (2, 1024, V) tensor per chunk spent most of an evaluation faulting in new pages) and
        scored as ``logsumexp − target logit``, without a log-softmax copy."""
        h, new_state = self.top(type_chars, inputs, state)            # (2, B, T, P)
        h = h.reshape(2, -1, h.shape[-1])
        y = targets.reshape(2, -1)
        total = h.new_zeros(2)
        buf = h.new_empty(min(chunk, h.shape[1]), self.vocab_size)
        for d in range(2):
            for a in range(0, h.shape[1], chunk):
                part = h[d, a:a + chunk]
                logits = torch.addmm(self.softmax_b, part, self.softmax_w.t(),
                                     out=buf[:part.shape[0]])         # (c, V)
                target = logits.gather(1, y[d, a:a + chunk, None])[:, 0]
                total[d] += (torch.logsumexp(logits, 1) - target).sum()
        return total, new_state


class LogUniformSampler:
    """Zipfian negatives over a frequency-sorted vocabulary (TensorFlow's log-uniform sampler).

    ``p(r) = (log(r + 2) − log(r + 1)) / log(V + 1)``. ``k`` ids are drawn with replacement and
    de-duplicated; the expected count of id ``r`` in the draw is ``1 − (1 − p(r))^k``.
    """

    def __init__(self, vocab_size: int, k: int):
        self.vocab_size, self.k = vocab_size, k
        r = torch.arange(vocab_size, dtype=torch.float64)
        p = (torch.log(r + 2) - torch.log(r + 1)) / math.log(vocab_size + 1)
        self.log_expected = torch.log(-torch.expm1(k * torch.log1p(-p))).float()   # (V,)

    def sample(self, generator: torch.Generator) -> Tensor:
        """(K',) distinct ids, K' ≤ k, sorted."""
        u = torch.rand(self.k, generator=generator, dtype=torch.float64)
        ids = (torch.exp(u * math.log(self.vocab_size + 1)) - 1).long()
        return torch.unique(ids.clamp_(0, self.vocab_size - 1))
