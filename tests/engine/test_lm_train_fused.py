"""The fused training LSTM layer and the faster sampled softmax against the autograd path."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from elmo_engine.train.data import epoch_order
from elmo_engine.io.datasets.corpus_text import read_documents
from elmo_engine.train.fused_lstm import FusedLSTMLayer, fused_lstm_stack
from elmo_engine.train.model import BiLanguageModel, LogUniformSampler
from elmo_engine.train.presets import preset
from elmo_engine.model.options import BiLMOptions


def _options(dim=24, proj=8, clip=3.0, skip=True, layers=2) -> BiLMOptions:
    """Small biLM options; ``proj == dim`` means no LSTM projection."""
    lstm = {"dim": dim, "projection_dim": proj, "n_layers": layers, "cell_clip": clip,
            "proj_clip": clip, "use_skip_connections": skip}
    return BiLMOptions.from_json_dict({
        "char_cnn": {"activation": "relu", "embedding": {"dim": 8},
                     "filters": [[1, 8], [2, 8], [3, 16]], "max_characters_per_token": 50,
                     "n_characters": 262, "n_highway": 1},
        "lstm": lstm}, "test options")


def _model(opts, vocab=40, seed=1, noise=0.3) -> BiLanguageModel:
    model = BiLanguageModel(opts, vocab, fused=False)
    model.reset_parameters(torch.Generator().manual_seed(seed))
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():          # larger weights: gates saturate, clips engage
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * noise)
    return model


def _reference_loss(model, type_chars, inputs, targets, state, negatives, neg_logq, target_logq):
    """The sampled softmax as first written (logits concatenated, hits masked by comparison),
    on the biLM's autograd LSTM path: today's trainer, the baseline of the fused path."""
    h, _ = BiLanguageModel.top(model, type_chars, inputs, state)
    h = h.reshape(2, -1, h.shape[-1])
    y = targets.reshape(2, -1)
    true_logit = (h * model.softmax_w[y]).sum(-1) + model.softmax_b[y] - target_logq.reshape(2, -1)
    neg_logit = h @ model.softmax_w[negatives].t() + (model.softmax_b[negatives] - neg_logq)
    neg_logit = neg_logit.masked_fill(y[..., None] == negatives[None, None, :], float("-inf"))
    logits = torch.cat([true_logit[..., None], neg_logit], -1)
    return (torch.logsumexp(logits, -1) - true_logit).mean(1)


def _batch(opts, n_types=60, vocab=40, bsz=4, steps=6, seed=3):
    g = torch.Generator().manual_seed(seed)
    chars = torch.randint(1, 200, (n_types, 50), generator=g)
    chars[:, 12:] = 261                                               # padding after 12 chars
    inputs = torch.randint(0, n_types, (2, bsz, steps), generator=g)
    targets = torch.randint(0, vocab, (2, bsz, steps), generator=g)
    return chars, inputs, targets


def _state(model, bsz, seed=4):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(c.shape, generator=g), torch.randn(h.shape, generator=g) * 0.5)
            for c, h in model.bilm.lstm.zero_state(bsz)]


def _grads(model):
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


CASES = {
    "projection, clips": dict(),
    "tight clips (most values clipped)": dict(clip=0.05),
    "no clips, no skip": dict(clip=None, skip=False),
    "no projection": dict(dim=8, proj=8),
    "three layers": dict(layers=3),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("dropout", [False, True])
def test_fused_step_equals_autograd_path(case, dropout):
    opts = _options(**CASES[case])
    reference = _model(opts)
    fused = copy.deepcopy(reference)
    fused.fused = True
    chars, inputs, targets = _batch(opts)
    state = _state(reference, 4)
    negatives = torch.arange(0, 40, 3)
    logq = LogUniformSampler(40, 20).log_expected
    masks = [None, None]
    if dropout:
        g = torch.Generator().manual_seed(5)
        masks = list((torch.rand((2, 2, 4, 6, opts.output_dim), generator=g) > 0.3).float() / 0.7)
    # the reference: today's trainer; the fused model: BiLanguageModel.forward
    x = reference.token_layer(chars, inputs)
    if dropout:
        x = x * masks[0]
    outs, ref_state = reference.bilm.lstm(x, [4] * 6, state)
    h = outs[-1] if not dropout else outs[-1] * masks[1]
    ref_loss = _softmax_loss(reference, h, targets, negatives, logq)
    ref_loss.sum().backward()
    loss, new_state = fused(chars, inputs, targets, state, negatives, logq[negatives],
                            logq[targets], masks[0], masks[1])
    loss.sum().backward()
    assert torch.allclose(loss, ref_loss, atol=1e-6, rtol=1e-6), (loss, ref_loss)
    for (c1, h1), (c2, h2) in zip(ref_state, new_state):
        assert torch.allclose(c1, c2, atol=1e-5) and torch.allclose(h1, h2, atol=1e-5)
    want, got = _grads(reference), _grads(fused)
    assert want.keys() == got.keys() and len(want) > 10
    for name in want:
        scale = float(want[name].abs().max()) + 1e-12
        err = float((want[name] - got[name]).abs().max()) / scale
        assert err < 2e-5, (name, err)


def _softmax_loss(model, h, targets, negatives, logq):
    h = h.reshape(2, -1, h.shape[-1])
    y = targets.reshape(2, -1)
    true_logit = (h * model.softmax_w[y]).sum(-1) + model.softmax_b[y] - logq[y]
    neg_logit = h @ model.softmax_w[negatives].t() + (model.softmax_b[negatives] - logq[negatives])
    neg_logit = neg_logit.masked_fill(y[..., None] == negatives[None, None, :], float("-inf"))
    logits = torch.cat([true_logit[..., None], neg_logit], -1)
    return (torch.logsumexp(logits, -1) - true_logit).mean(1)


def test_demo_architecture_loss_on_a_fixed_batch_within_1e5():
    """The issue's bound: today's trainer (autograd LSTM, concatenated sampled softmax) and the
    fused trainer give the same loss on a fixed batch of the demo architecture to ≤ 1e-5."""
    cfg = preset("demo")
    opts = BiLMOptions.from_json_dict(cfg["options"], "demo")
    vocab = 500
    reference = BiLanguageModel(opts, vocab, fused=False)
    reference.reset_parameters(torch.Generator().manual_seed(0))
    fused = copy.deepcopy(reference)
    fused.fused = True
    chars, inputs, targets = _batch(opts, n_types=300, vocab=vocab, bsz=8, steps=20)
    state = _state(reference, 8)
    sampler = LogUniformSampler(vocab, 64)
    negatives = sampler.sample(torch.Generator().manual_seed(9))
    logq = sampler.log_expected
    targets[0, 0, :5] = negatives[:5]                                  # accidental hits
    want = _reference_loss(reference, chars, inputs, targets, state, negatives, logq[negatives],
                           logq[targets])
    got, _ = fused(chars, inputs, targets, state, negatives, logq[negatives], logq[targets])
    assert float((want - got).detach().abs().max()) <= 1e-5, (want, got)
    want.sum().backward()
    got.sum().backward()
    for name, g in _grads(reference).items():
        other = dict(fused.named_parameters())[name].grad
        assert torch.allclose(g, other, atol=1e-6 + 1e-4 * float(g.abs().max())), name


def test_accidental_hits_score_minus_infinity():
    opts = _options()
    model = _model(opts)
    model.fused = True
    chars, inputs, targets = _batch(opts)
    negatives = torch.tensor([0, 3, 7, 11])
    targets[:] = 3                                                     # every target is a hit
    logq = torch.zeros(40)
    loss, _ = model(chars, inputs, targets, model.bilm.lstm.zero_state(4), negatives,
                    logq[negatives], logq[targets])
    with torch.no_grad():
        h, _ = model.top(chars, inputs, model.bilm.lstm.zero_state(4))
    h = h.reshape(2, -1, h.shape[-1])
    true = h @ model.softmax_w[3] + model.softmax_b[3]
    others = h @ model.softmax_w[[0, 7, 11]].t() + model.softmax_b[[0, 7, 11]]
    want = (torch.logsumexp(torch.cat([true[..., None], others], -1), -1) - true).mean(1)
    assert torch.allclose(loss.detach(), want, atol=1e-6)


def test_fused_layer_shared_rows_equal_gathered_rows():
    """Layer 0 per distinct type (rows shared by both directions through ``idx``) gives the
    outputs and gradients of the same rows gathered per position."""
    torch.manual_seed(0)
    u, steps, bsz, dim, proj = 7, 5, 3, 16, 6
    tok = torch.randn(u, proj, requires_grad=True)
    idx = torch.randint(0, u, (2, steps * bsz))
    w_in = torch.randn(2, proj, 4 * dim, requires_grad=True)
    w_rec = torch.randn(2, proj, 4 * dim, requires_grad=True)
    b = torch.randn(2, 4 * dim, requires_grad=True)
    wp = torch.randn(2, dim, proj, requires_grad=True)
    c0, h0 = torch.randn(2, bsz, dim), torch.randn(2, bsz, proj)
    out1, c1, h1 = FusedLSTMLayer.apply(tok, w_in, w_rec, b, wp, c0, h0, idx, steps, 2.0, 2.0)
    gathered = tok[idx]                                                # (2, N, P)
    out2, c2, h2 = FusedLSTMLayer.apply(gathered, w_in, w_rec, b, wp, c0, h0, None, steps, 2.0,
                                        2.0)
    assert torch.allclose(out1, out2, atol=1e-6) and torch.equal(c1, c2) and torch.equal(h1, h2)
    weight = torch.randn(out1.shape)
    g1 = torch.autograd.grad((out1 * weight).sum(), [tok, w_in, w_rec, b, wp])
    g2 = torch.autograd.grad((out2 * weight).sum(), [tok, w_in, w_rec, b, wp])
    for a, bb in zip(g1, g2):
        assert torch.allclose(a, bb, atol=1e-4, rtol=1e-4)


def test_fused_stack_final_state_carries_like_one_long_window():
    """Two windows with the state carried equal one window of twice the length."""
    opts = _options()
    model = _model(opts)
    g = torch.Generator().manual_seed(2)
    tok = torch.randn(2, 8 * 3, opts.projection_dim, generator=g)     # per position, T=8, B=3
    state = _state(model, 3)
    with torch.enable_grad():
        whole, _ = fused_lstm_stack(model.bilm.lstm, tok, None, 8, state)
        first, mid = fused_lstm_stack(model.bilm.lstm, tok[:, :12], None, 4, state)
        second, _ = fused_lstm_stack(model.bilm.lstm, tok[:, 12:], None, 4, mid)
    for w, a, b in zip(whole, first, second):
        assert torch.allclose(w, torch.cat([a, b], 1), atol=1e-5)


def test_read_documents_and_document_order(tmp_path):
    f = tmp_path / "c.txt"
    f.write_text("= Book :: ch1 =\nA bank. The river.\nMore text here.\n\n"
                 "= Book :: ch2 =\nSecond chapter.\n\nThird part . Still third .\n", "utf-8")
    docs = read_documents(f)
    assert [len(d) for d in docs] == [3, 1, 2]
    assert docs[0][0] == ["A", "bank", "."] and docs[2][1] == ["Still", "third", "."]
    plain = tmp_path / "p.txt"
    plain.write_text("one line .\ntwo line .\nthree line .\n", "utf-8")
    assert [len(d) for d in read_documents(plain)] == [1, 1, 1]       # a document per line
    starts = np.array([0, 3, 4, 9])
    order = epoch_order(12, 0, 0, starts)
    assert sorted(order.tolist()) == list(range(12))
    # each document's sentences stay together and in order
    pos = {s: i for i, s in enumerate(order.tolist())}
    for a, b in ((0, 3), (3, 4), (4, 9), (9, 12)):
        idx = [pos[s] for s in range(a, b)]
        assert idx == list(range(idx[0], idx[0] + (b - a)))
    assert np.array_equal(order, epoch_order(12, 0, 0, starts))
    assert not np.array_equal(order, epoch_order(12, 0, 1, starts)) or \
        not np.array_equal(order, epoch_order(12, 0, 2, starts))
