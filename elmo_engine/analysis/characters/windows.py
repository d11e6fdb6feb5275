"""Character ids shown as text, and filter activations on character windows.

Everything here reads the checkpoint's parameters from a :class:`~elmo_engine.model.char_cnn.
CharCNN` and computes in float32 on the CPU, as the model does: the activation of filter ``j``
(width ``w``) on the window ``ids[p:p+w]`` is ``Σ_i Σ_c E[ids[p+i], c] · W[i, c, j] + b[j]``
before the non-linearity, and the max-pool takes it over the positions ``p = 0 … M − w``
(docs/checkpoint-format.md §6).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np
import torch

from elmo_engine.model.chars import BOS_CHAR, BOW_CHAR, EOS_CHAR, EOW_CHAR, PAD_CHAR

#: how the marker ids are shown
MARKS = {BOW_CHAR: "⟨", EOW_CHAR: "⟩", PAD_CHAR: "·", BOS_CHAR: "<S>", EOS_CHAR: "</S>", 0: "∅"}


def render_ids(ids: Sequence[int]) -> str:
    """Character ids as text: UTF-8 bytes decoded (a byte that is not a whole character as
    ``\\xNN``), ⟨ and ⟩ for the begin- and end-of-word marks, · for padding."""
    out: List[str] = []
    run = bytearray()
    for i in ids:
        i = int(i)
        if 1 <= i <= 256:
            run.append(i - 1)
            continue
        if run:
            out.append(run.decode("utf-8", errors="backslashreplace"))
            run = bytearray()
        out.append(MARKS.get(i, f"[{i}]"))
    if run:
        out.append(run.decode("utf-8", errors="backslashreplace"))
    return "".join(out)


def query_ids(text: str) -> List[int]:
    """An n-gram query as character ids: ``-ness`` (or ``ness⟩``) is a suffix (ends with the
    end-of-word mark), ``un-`` (or ``⟨un``) a prefix; anything else is matched anywhere."""
    prefix = text.startswith("⟨") or (text.endswith("-") and len(text) > 1)
    suffix = text.endswith("⟩") or (text.startswith("-") and len(text) > 1)
    core = text.strip("⟨⟩")
    if prefix and text.endswith("-"):
        core = core[:-1]
    if suffix and text.startswith("-"):
        core = core[1:]
    ids = [b + 1 for b in core.encode("utf-8", errors="ignore")]
    return ([BOW_CHAR] if prefix else []) + ids + ([EOW_CHAR] if suffix else [])


@dataclass(frozen=True)
class Filters:
    """The char-CNN's parameters as float32 arrays on the CPU.

    Attributes
    ----------
    table : (262, C) character embeddings, row 0 the zero padding row
    banks : per filter width, ``(width, kernel (width·C, k), bias (k,), first filter index)``
    activation : "relu" or "tanh"
    highway : per highway layer ``(W_carry, b_carry, W_transform, b_transform)``
    projection : ``(W (N, P), b (P,))`` or None
    max_chars : the ids per token (max_characters_per_token)
    """

    table: torch.Tensor
    banks: Tuple[Tuple[int, torch.Tensor, torch.Tensor, int], ...]
    activation: str
    highway: Tuple[Tuple[torch.Tensor, ...], ...]
    projection: Optional[Tuple[torch.Tensor, torch.Tensor]]
    max_chars: int

    @property
    def n_filters(self) -> int:
        return sum(int(b[2].shape[0]) for b in self.banks)

    def widths(self) -> np.ndarray:
        """The width of every filter, (N,) int."""
        return np.concatenate([np.full(int(b[2].shape[0]), b[0]) for b in self.banks])

    def window_values(self, bank: int, windows: np.ndarray) -> torch.Tensor:
        """Pre-activation values (conv + bias) of bank ``bank``'s filters on ``windows``
        ``(U, w)`` int ids: ``(U, k)`` float32."""
        width, kernel, bias, _ = self.banks[bank]
        ids = torch.from_numpy(np.require(windows, np.int64, ("C", "W")))
        emb = self.table[ids].reshape(len(windows), width * self.table.shape[1])  # (U, w·C)
        return torch.addmm(bias, emb, kernel)                                       # (U, k)

    def nonlinear(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) if self.activation == "relu" else torch.tanh(x)


def filters_of(char_cnn) -> Filters:
    """:class:`Filters` from a model's ``char_cnn`` (a copy in float32 on the CPU)."""
    def f(t):
        return t.detach().to("cpu", torch.float32).clone()

    opts = char_cnn.opts
    emb = f(char_cnn.char_embed)
    table = torch.cat([emb.new_zeros(1, emb.shape[1]), emb], 0)                     # (262, C)
    banks = []
    start = 0
    for (width, k), w, b in zip(opts.filters, char_cnn.conv_w, char_cnn.conv_b):
        kernel = f(w)[0].reshape(width * emb.shape[1], k)      # (1, w, C, k) → (w·C, k)
        banks.append((int(width), kernel, f(b), start))
        start += int(k)
    highway = tuple((f(wc), f(bc), f(wt), f(bt)) for wc, bc, wt, bt in zip(
        char_cnn.w_carry, char_cnn.b_carry, char_cnn.w_transform, char_cnn.b_transform))
    proj = None
    if char_cnn.w_proj is not None and char_cnn.b_proj is not None:
        proj = (f(char_cnn.w_proj), f(char_cnn.b_proj))
    return Filters(table, tuple(banks), opts.activation, highway, proj,
                   int(opts.max_characters_per_token))


def all_windows(ids: np.ndarray, width: int) -> np.ndarray:
    """Every max-pool window of width ``width`` of ``ids`` (n, M): ``(n, M − w + 1, w)``."""
    return np.lib.stride_tricks.sliding_window_view(ids, width, axis=1)
