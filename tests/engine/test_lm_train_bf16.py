"""``train-lm --precision bf16``: bf16 GEMMs under torch.autocast with float32 master weights,
optimizer, cell state and loss; close to the float32 step; refused on a CPU without bf16 units."""
from __future__ import annotations

import copy
import dataclasses

import pytest
import torch

from elmo_engine import runtime
from elmo_engine.errors import InputError
from elmo_engine.train.fused_lstm import autocast_dtype
from elmo_engine.train.model import LogUniformSampler
from elmo_engine.train.trainer import train

from lm_train_helpers import quiet, tiny_config, write_corpus
from test_lm_train_fused import _batch, _grads, _model, _options, _state

needs_units = pytest.mark.skipif(not runtime.cpu_bf16().offered,
                                 reason="this CPU has no bf16 units (AMX or AVX512_BF16)")


def _step(model, bf16: bool):
    opts = model.bilm.opts
    chars, inputs, targets = _batch(opts, bsz=4, steps=6)
    state = _state(model, 4)
    negatives = torch.arange(0, 40, 3)
    logq = LogUniformSampler(40, 20).log_expected
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        loss, new_state = model(chars, inputs, targets, state, negatives, logq[negatives],
                                logq[targets])
    loss.sum().backward()
    return loss.detach(), [(c.detach(), h.detach()) for c, h in new_state]


def test_autocast_dtype_reads_the_callers_autocast():
    assert autocast_dtype(torch.device("cpu")) is None
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert autocast_dtype(torch.device("cpu")) == torch.bfloat16


@needs_units
@pytest.mark.parametrize("fused", [True, False])
def test_bf16_step_is_close_to_float32_with_float32_master_weights(fused):
    ref = _model(_options(dim=64, proj=16), noise=0.05)
    ref.fused = fused
    low = copy.deepcopy(ref)
    loss32, state32 = _step(ref, False)
    loss16, state16 = _step(low, True)
    assert loss16.dtype == torch.float32
    assert not torch.equal(loss16, loss32)                  # it did run in bf16
    assert torch.allclose(loss16, loss32, rtol=2e-2), (loss16, loss32)
    for (c1, h1), (c2, h2) in zip(state32, state16):
        assert c2.dtype == torch.float32 and h2.dtype == torch.float32
        assert float((c1 - c2).abs().max()) < 0.05 and float((h1 - h2).abs().max()) < 0.05
    want, got = _grads(ref), _grads(low)
    assert want.keys() == got.keys() and len(want) > 10
    for name in want:
        assert got[name].dtype == torch.float32
        cos = torch.nn.functional.cosine_similarity(want[name].flatten(), got[name].flatten(),
                                                    dim=0)
        assert float(cos) > 0.99, (name, float(cos))
    assert all(p.dtype == torch.float32 for p in low.parameters())


@needs_units
def test_train_lm_bf16_runs_and_records_its_precision(tmp_path):
    corpus = write_corpus(tmp_path / "train.txt", 300, 1)
    dev = write_corpus(tmp_path / "dev.txt", 40, 2)
    runs = {}
    for precision in ("fp32", "bf16"):
        cfg = tiny_config(max_steps=12, precision=precision)
        runs[precision] = train([corpus], [dev], tmp_path / precision, cfg, device="cpu",
                                show_progress=False, log=quiet)
    a, b = runs["fp32"].dev["mean"], runs["bf16"].dev["mean"]
    assert a != b and abs(a - b) / a < 0.05, (a, b)
    import json
    saved = json.loads((tmp_path / "bf16" / "training.json").read_text())
    assert "bf16" in json.dumps(saved)


def test_train_lm_bf16_refused_without_units(tmp_path, monkeypatch):
    cpu = dataclasses.replace(runtime.cpu_bf16(), units=None)
    monkeypatch.setattr(runtime, "cpu_bf16", lambda: cpu)
    corpus = write_corpus(tmp_path / "train.txt", 50, 1)
    with pytest.raises(InputError, match="bf16 units"):
        train([corpus], [corpus], tmp_path / "out", tiny_config(precision="bf16"), device="cpu",
              show_progress=False, log=quiet)
    with pytest.raises(InputError, match="precision must be fp32 or bf16"):
        train([corpus], [corpus], tmp_path / "out2", tiny_config(precision="fp16"),
              device="cpu", show_progress=False, log=quiet)


def test_bf16_pads_the_per_type_rows_and_the_negatives_to_a_bucket(monkeypatch):
    # under autocast the distinct types and the negatives are rounded up to SHAPE_BUCKET rows
    # (oneDNN compiles a kernel per new bf16 GEMM shape), the padded rows are never read:
    # the loss and the gradients are those of the unpadded step
    from elmo_engine.train import model as lm

    ref = _model(_options(dim=64, proj=16), noise=0.05)
    ref.fused = True
    low = copy.deepcopy(ref)
    chars, inputs, _ = _batch(ref.bilm.opts, bsz=4, steps=6)
    distinct = len(torch.unique(inputs))
    rows, padded = [], []
    for m in (ref, low):
        forward = m.bilm.char_cnn.forward
        m.bilm.char_cnn.forward = lambda ids, f=forward: rows.append(ids.shape[0]) or f(ids)
    pad = torch.nn.functional.pad
    monkeypatch.setattr(torch.nn.functional, "pad",
                        lambda t, p, *a, **k: padded.append((t.shape[0], p)) or pad(t, p, *a, **k))
    monkeypatch.setattr(lm, "SHAPE_BUCKET", 1)
    loss1, state1 = _step(ref, True)
    monkeypatch.setattr(lm, "SHAPE_BUCKET", 16)
    loss16, state16 = _step(low, True)
    assert distinct % 16 and rows == [distinct, -(-distinct // 16) * 16], (distinct, rows)
    assert (14, (0, 0, 0, 0)) in padded and (14, (0, 0, 0, 2)) in padded   # 14 negatives → 16
    assert torch.allclose(loss16, loss1, rtol=1e-5, atol=1e-6), (loss16, loss1)
    for (c1, h1), (c2, h2) in zip(state1, state16):
        assert torch.allclose(c1, c2, atol=1e-5) and torch.allclose(h1, h2, atol=1e-5)
    want, got = _grads(ref), _grads(low)
    assert want.keys() == got.keys()
    for name in want:
        assert torch.allclose(got[name], want[name], rtol=1e-4, atol=1e-6), name
    # float32 is not padded
    rows.clear()
    _step(copy.deepcopy(ref), False)
    assert rows == [distinct]
