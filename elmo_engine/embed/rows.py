"""A stateful batch run as groups of its rows (the reference protocol of
``docs/checkpoint-format.md`` §8, as :meth:`~elmo_engine.embed.embedder.Embedder.embed_stateful`
runs it).

Each row of a stateful batch has its own LSTM state slot and depends on no other row, so a batch
may run as several groups of rows, each with its rows' slots, and come out the same up to float
rounding: longest first within a padded-token budget (one long line then does not pad every row
of its batch), or halved after a GPU runs out of memory.
"""
from __future__ import annotations

from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np
import torch

from elmo_engine.model.bilm import LSTMState

#: ``run(sentences, init)`` → (one array per sentence, final state): one group's forward pass
RunRows = Callable[[list, LSTMState], Tuple[List[np.ndarray], LSTMState]]


def longest_first(lengths: Sequence[int], group_sizes: Callable[[List[int]], List[int]]
                  ) -> List[List[int]]:
    """The rows, longest first, cut into consecutive groups of ``group_sizes(sorted lengths)``."""
    order = sorted(range(len(lengths)), key=lambda r: -lengths[r])
    groups, start = [], 0
    for size in group_sizes([lengths[r] for r in order]):
        groups.append(order[start:start + size])
        start += size
    return groups


def run_in_groups(batch: list, init: LSTMState, groups: List[List[int]], run: RunRows
                  ) -> Tuple[List[np.ndarray], LSTMState]:
    """``run`` each group of rows of ``batch`` on its rows' slots of ``init`` (per layer
    ``(c, h)``, rows on dim 1); the arrays in the batch's order and the final state with every
    row back in its slot (on the device of the last group, which may have fallen back to the
    CPU)."""
    arrays: List[Optional[np.ndarray]] = [None] * len(batch)
    parts = []
    for rows in groups:
        idx = torch.tensor(rows, device=init[0][0].device)
        got, fin = run([batch[r] for r in rows], [(c[:, idx], h[:, idx]) for c, h in init])
        for r, a in zip(rows, got):
            arrays[r] = a
        parts.append((rows, fin))
    last = parts[-1][1]                  # its device and types (the cell float32 in bf16/fp16)
    dev = last[0][0].device
    final = [(torch.empty(c.shape, dtype=lc.dtype, device=dev),
              torch.empty(h.shape, dtype=lh.dtype, device=dev))
             for (c, h), (lc, lh) in zip(init, last)]
    for rows, fin in parts:
        idx = torch.tensor(rows, device=dev)
        for (c, h), (cf, hf) in zip(final, fin):
            c[:, idx] = cf.to(dev, c.dtype)
            h[:, idx] = hf.to(dev, h.dtype)
    return arrays, final  # type: ignore[return-value]
