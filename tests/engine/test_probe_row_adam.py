"""The word-sense heads' row-wise Adam trains exactly as a sparse embedding table with
``torch.optim.SparseAdam`` does (the textbook way to move only the rows a batch uses)."""
from __future__ import annotations

import numpy as np
import torch
from torch.nn import functional as F

from elmo_engine.analysis.probes.classifiers import Heads, RowAdam


def _reference_step(table, opt, x, cand, y):
    """The same heads as an ``nn.Embedding(sparse=True)`` of rows ``H·(E+1)`` under SparseAdam;
    padding points at an extra last row."""
    h, b, e = x.shape
    idx = torch.where(cand >= 0, cand, table.num_embeddings - 1)
    wc = table(idx).view(b, idx.shape[1], h, e + 1)                                 # (B, M, H, E+1)
    xa = torch.cat([x, x.new_ones(h, b, 1)], dim=2)
    logits = torch.einsum("hbe,bmhe->hbm", xa, wc).masked_fill(cand[None] < 0, -1e9)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.repeat(h), ignore_index=-1)
    opt.zero_grad()
    (loss * h).backward()
    opt.step()


def test_row_adam_matches_sparse_adam():
    torch.manual_seed(0)
    n_heads, dim, n_classes = 3, 16, 40
    heads = Heads(n_heads, dim, n_classes, seed=3, restricted=True)
    ref = torch.nn.Embedding(n_classes + 1, n_heads * (dim + 1), sparse=True)
    with torch.no_grad():
        ref.weight[:n_classes] = heads.table.reshape(n_classes, -1)
    opt_ref = torch.optim.SparseAdam(list(ref.parameters()), lr=0.01)
    opt = RowAdam(heads, lr=0.01)
    touched = torch.zeros(n_classes, dtype=torch.bool)
    for step in range(6):
        x = torch.randn(n_heads, 12, dim)
        # candidates of 12 examples among the first 30 classes, repeated ids, −1 padding
        cand = torch.randint(1, 30, (12, 4))
        cand[::3, 3] = -1
        y = torch.randint(0, 3, (12,))
        y[5] = -1
        touched[cand[cand >= 0]] = True
        logits = heads(x, cand)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.repeat(n_heads),
                               ignore_index=-1, reduction="none").view(n_heads, -1)
        opt.zero_grad()
        (loss.sum(dim=1) / int((y >= 0).sum())).sum().backward()
        opt.step()
        _reference_step(ref, opt_ref, x, cand, y)
    got = heads.table.reshape(n_classes, -1)
    torch.testing.assert_close(got, ref.weight.detach()[:n_classes], atol=1e-6, rtol=1e-5)
    # rows no batch used never moved (class 0 only ever sat beside padding); used ones did
    assert not touched[0]
    start = Heads(n_heads, dim, n_classes, seed=3, restricted=True).table
    assert torch.equal(heads.table[~touched], start[~touched])
    assert (heads.table[touched] - start[touched]).abs().amax() > 1e-3


def test_evaluation_forward_leaves_no_rows_and_matches_training_forward():
    heads = Heads(2, 8, 10, seed=1, restricted=True)
    x, cand = torch.randn(2, 5, 8), torch.tensor([[0, 3, -1], [4, 4, 2], [9, -1, -1],
                                                   [1, 2, 3], [7, 8, -1]])
    train_logits = heads(x, cand)
    assert heads.last_rows is not None and heads.last_rows[0].tolist() == [0, 1, 2, 3, 4, 7, 8, 9]
    assert heads.last_rows[1].shape == (8, 2, 9)
    heads.eval()
    with torch.no_grad():
        heads.last_rows = None
        eval_logits = heads(x, cand)
    assert heads.last_rows is None
    torch.testing.assert_close(train_logits.detach(), eval_logits)
    assert (eval_logits[:, 2, 1:] < -1e8).all() and eval_logits.shape == (2, 5, 3)


def test_min_delta_stops_the_creep_but_keeps_the_best_snapshot():
    """A gain under ``min_delta`` keeps each head's best weights but does not restart the
    patience: with a huge ``min_delta`` only epoch 1 counts, so the run ends after
    ``1 + patience`` epochs; with none it runs until the dev accuracy stalls."""
    from elmo_engine.analysis.probes.classifiers import (LayerProbes, Normaliser, Split,
                                                         TrainSettings, fit)

    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 600, 6, generator=g)
    y = (x[1, :, 0] + 0.3 * torch.randn(600, generator=g) > 0).long()     # layer 1 decides
    train, dev = Split(x[:, :400], y[:400], None), Split(x[:, 400:], y[400:], None)
    norm = Normaliser(x[:, :400].numpy())

    def run(min_delta):
        model = LayerProbes(2, 6, 2, seed=0)
        settings = TrainSettings(epochs=40, patience=2, batch_size=16, lr=3e-3, seed=0,
                                 min_delta=min_delta)
        return fit(model, 2, train, dev, norm, settings, "t")

    capped = run(0.5)
    assert capped["epochs"] == 1 + 2
    curve = np.asarray(capped["dev"])                                  # (epochs, heads)
    assert capped["best_dev"] == curve.max(axis=0).tolist()           # best kept on any gain
    free = run(0.0)
    assert free["epochs"] > capped["epochs"]
    assert free["best_dev"][1] >= capped["best_dev"][1] > 0.7
