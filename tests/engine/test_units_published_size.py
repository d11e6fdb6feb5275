"""The published Original model's shape through the units code (issue 40): random weights in the
layout of 2x4096_512_2048cnn_2xhighway (4,096 cells per layer and direction, projected to 512);
capture, ranking and an ablation on a handful of sentences, checking the shapes and that the
memory bounds computed from the options hold (a capture one byte under its size is refused)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from elmo_engine.analysis.units.collect import collect
from elmo_engine.analysis.units.rank import RankSettings, rank_units
from elmo_engine.analysis.units.remeasure import fit_probe, probe_under
from elmo_engine.errors import InputError
from elmo_engine.io.datasets.records import LabelledSentence
from elmo_engine.model.bilm import BiLM
from elmo_engine.model.lstm_inspect import (Capture, Intervention, Op, StateKind, capture_bytes,
                                            framed_tokens, inspect, state_width)
from elmo_engine.model.options import BiLMOptions

pytestmark = pytest.mark.usefixtures("torch_one_thread")

WORDS = ["the", "keys", "to", "cabinet", "are", "is", "on", "table", "a", "dog", "dogs", "runs",
         "run", "old", "man", "men"]


@pytest.fixture(scope="module")
def published_original() -> BiLM:
    """Random weights in the layout of the published Original model: 2,048 character filters
    of widths 1-7, two highway layers, 4,096 cells projected to 512, clips at 3."""
    opts = BiLMOptions(filters=((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512),
                                (7, 1024)), n_highway=2, projection_dim=512, lstm_dim=4096,
                       n_layers=2, cell_clip=3.0, proj_clip=3.0)
    model = BiLM(opts)
    gen = torch.Generator().manual_seed(11)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.02)
    return model.eval()


def sentences(n: int = 8):
    rng = np.random.default_rng(1)
    out = []
    for _ in range(n):
        toks = tuple(str(w) for w in rng.choice(WORDS, size=int(rng.integers(4, 8))))
        out.append(LabelledSentence(toks, tuple("Plur" if t.endswith("s") else "Sing"
                                                for t in toks)))
    return out


def test_capture_rank_and_ablate_with_4096_cells(published_original):
    model = published_original
    opts = model.opts
    assert state_width(opts, StateKind.C) == 4096 and state_width(opts, StateKind.H) == 512
    sents = sentences()
    tok, lengths = framed_tokens(model, [s.tokens for s in sents])
    bsz, steps = tok.shape[:2]
    cap = Capture(kinds=(StateKind.C, StateKind.H), layers=(1,), directions=(0, 1))
    need = capture_bytes(opts, cap, bsz, steps)
    assert need == 2 * bsz * steps * (4096 + 512) * 2                  # float16, 2 directions
    res = inspect(model, tok, lengths, cap)
    assert res.states[(1, 0, StateKind.C)].shape == (bsz, steps, 4096)
    assert res.states[(1, 1, StateKind.H)].shape == (bsz, steps, 512)
    assert res.states[(1, 0, StateKind.C)].dtype == torch.float16
    assert res.layers.shape == (3, bsz, steps, 1024)
    assert float(res.states[(1, 0, StateKind.C)].abs().max()) <= 3.0   # the cell clip
    held = sum(t.numel() * t.element_size() for t in res.states.values())
    assert held == need                                                # the bound is the bytes
    with pytest.raises(InputError, match="over the bound"):
        inspect(model, tok, lengths, Capture(kinds=cap.kinds, layers=(1,), max_bytes=need - 1))

    data = collect(model, sents, [StateKind.C], layers=[1])
    n = sum(len(s.targets()) for s in sents)
    assert data.states[(1, 0, StateKind.C)].shape == (n, 4096)
    with pytest.raises(InputError, match="over the bound"):
        collect(model, sents, [StateKind.C], layers=[1], max_bytes=n * 4096 * 2 * 2 - 1)
    (ranked,) = rank_units(data, RankSettings(ks=(1, 256), seeds=2, min_steps=20),
                           keys=[(1, 0, StateKind.C)])
    for order in ranked.order.values():
        assert sorted(order.tolist()) == list(range(4096))
    assert {(p.k, len(p.random)) for p in ranked.curve} == {(1, 2), (256, 2)}

    top = [int(u) for u in ranked.order[next(iter(ranked.order))][:16]]
    iv = Intervention(1, 0, StateKind.C, tuple(top), Op.ZERO)
    after = inspect(model, tok, lengths, interventions=[iv]).layers
    assert torch.equal(after[:2], res.layers[:2])                      # below layer 1: untouched
    assert torch.equal(after[2, :, :, 512:], res.layers[2, :, :, 512:])  # backward: untouched
    assert not torch.equal(after[2, :, :, :512], res.layers[2, :, :, :512])
    probe = fit_probe(model, sents, 2)
    measured = probe_under(model, probe, [iv])
    assert 0.0 <= measured.after <= 1.0 and measured.test_tokens > 0
