"""bf16 on the CPU: offered only where the CPU has bf16 units (AMX or AVX512_BF16), refused in
one line elsewhere, and close to float32 on the published fixtures (bounds below, measured
figures in docs/performance.md)."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from elmo_engine import runtime
from elmo_engine.cli.main import main
from elmo_engine.embed.embedder import Embedder
from elmo_engine.embed.fidelity import compare_precisions, layer_fidelity, token_cosines
from elmo_engine.errors import InputError
from elmo_engine.model.checkpoint import load_checkpoint
from elmo_engine.model.lstm_packed import distinct_rows

from support import FIXTURES

#: per layer, bf16 against float32 over the fixture sentences (measured on an AVX512_BF16 EPYC:
#: medians ≥ 0.99999, 0.1 % quantiles ≥ 0.99990)
MEDIAN_BOUND = 0.9999
Q001_BOUND = 0.999

needs_units = pytest.mark.skipif(not runtime.cpu_bf16().offered,
                                 reason="this CPU has no bf16 units (AMX or AVX512_BF16)")


def _sentences():
    lists = json.loads((FIXTURES / "allennlp" / "sentences.json").read_text())
    return [s.split() for s in lists[0]]


@pytest.fixture()
def no_units(monkeypatch):
    cpu = dataclasses.replace(runtime.cpu_bf16(), units=None)
    monkeypatch.setattr(runtime, "cpu_bf16", lambda: cpu)
    return cpu


def test_detection_names_its_units_and_torch_capability():
    cpu = runtime.cpu_bf16()
    assert cpu.units in (None, "AMX", "AVX512_BF16")
    assert cpu.capability == torch.backends.cpu.get_cpu_capability()
    assert set(cpu.flags) <= {"avx512f", "avx512_bf16", "amx_bf16"}
    line = cpu.describe()
    assert cpu.capability in line and "\n" not in line
    assert ("bf16 offered" in line) == cpu.offered
    if "amx_bf16" in cpu.flags and "avx512_bf16" in cpu.flags:
        assert cpu.offered


def test_without_units_bf16_is_refused_in_one_line(no_units, tmp_path, capsys):
    model = load_checkpoint(FIXTURES / "allennlp")
    with pytest.raises(InputError, match="bf16 units .* has none.*slower than float32"):
        Embedder(model, device="cpu", precision="bf16")
    with pytest.raises(InputError, match="only offered on a GPU"):
        Embedder(model, device="cpu", precision="fp16")
    inp = tmp_path / "in.txt"
    inp.write_text("a b c\n", encoding="utf-8")
    out = tmp_path / "out.npz"
    assert main(["embed", str(inp), "-o", str(out), "--checkpoint", str(FIXTURES / "allennlp"),
                 "--device", "cpu", "--precision", "bf16"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "lacks" not in err[0] and "bf16 units" in err[0]
    assert not out.exists()
    assert Embedder(model, device="cpu").precision == "fp32"          # float32 always works


def test_token_cosines_and_layer_fidelity():
    a = np.array([[1.0, 0.0], [0.0, 0.0], [1.0, 1.0]])
    b = np.array([[2.0, 0.0], [0.0, 0.0], [1.0, -1.0]])
    np.testing.assert_allclose(token_cosines(a, b), [1.0, 1.0, 0.0])
    ref = [np.stack([a, a]), np.zeros((2, 0, 2))]
    fid = layer_fidelity(ref, [np.stack([a, b]), np.zeros((2, 0, 2))])
    assert [f.layer for f in fid] == [0, 1] and fid[0].n == 3
    assert fid[0].median == pytest.approx(1.0) and fid[1].minimum == pytest.approx(0.0)


def test_distinct_rows_groups_bf16_rows():
    gen = torch.Generator().manual_seed(0)
    base = torch.randn(7, 16, generator=gen).to(torch.bfloat16)
    rows = base[torch.randint(0, 7, (40,), generator=gen)]
    distinct, inverse = distinct_rows(rows)
    assert torch.equal(distinct[inverse], rows)
    assert distinct.shape[0] == len({tuple(r.float().tolist()) for r in rows})


@needs_units
@pytest.mark.parametrize("fixture", ["allennlp", "bilm-tf/model"])
def test_bf16_vectors_are_close_to_float32_per_layer(fixture):
    model = load_checkpoint(FIXTURES / fixture)
    fid = compare_precisions(model, _sentences(), "bf16")
    assert len(fid) == model.opts.n_output_layers
    for f in fid:
        assert f.n == sum(len(s) for s in _sentences())
        assert f.median >= MEDIAN_BOUND, f
        assert f.q001 >= Q001_BOUND, f
        assert f.median < 1.0 - 1e-9, f        # it really ran in bf16 (not float32 again)


@needs_units
@pytest.mark.parametrize("fixture", ["allennlp", "bilm-tf/model"])
def test_bf16_gates_near_zero_keep_their_digits(fixture):
    """Small gate pre-activations (the LSTM's weights × 0.1): tanh computed as 2·σ(2x) − 1 in
    bf16 cancelled near 0 (layer 1's 0.1 % quantile fell to 0.9905 on bilm-tf); the cell state
    and the gate arithmetic are float32, so bf16 rounds the GEMMs' operands only."""
    model = load_checkpoint(FIXTURES / fixture)
    with torch.no_grad():
        for p in model.lstm.parameters():
            p.mul_(0.1)
    for f in compare_precisions(model, _sentences(), "bf16"):
        assert f.q001 >= 0.9999, f
        assert f.median < 1.0 - 1e-9, f


@needs_units
def test_bf16_stateful_embedding_carries_its_state_close_to_float32():
    sents = _sentences()
    embedders = [Embedder(load_checkpoint(FIXTURES / "bilm-tf/model"), device="cpu",
                          precision=p, cache_size=0) for p in ("fp32", "bf16")]
    runs = [e.embed_stateful(sents, batch_size=2) for e in embedders]
    slots = embedders[1]._slots
    assert slots is not None and all(c.dtype == torch.float32 and h.dtype == torch.bfloat16
                                     for c, h in slots)          # the cell stays float32
    fid = layer_fidelity(*runs)
    assert [f.n for f in fid] == [sum(len(s) for s in sents)] * 3
    for f in fid:
        assert f.q001 >= Q001_BOUND, f


@needs_units
def test_bf16_embedder_runs_bf16_weights_and_packs_them(tmp_path):
    model = load_checkpoint(FIXTURES / "allennlp")
    emb = Embedder(model, device="cpu", precision="bf16")
    assert emb.model.dtype == torch.bfloat16 and emb.precision == "bf16"
    out = emb.embed([["a", "b", "c"], ["d", "e"], ["f"]])
    assert all(a.dtype == np.float32 for a in out)
    assert out[0].shape == (3, 3, 32)
    assert any(k[0] == "w_rec" for k in emb.model.lstm.kernels.packed_keys())
    # packed bf16 GEMMs agree with plain bf16 GEMMs to bf16 rounding
    plain = Embedder(load_checkpoint(FIXTURES / "allennlp"), device="cpu", precision="bf16")
    plain.model.fast_path = dataclasses.replace(plain.model.fast_path, packed_weights=False)
    for a, b in zip(out, plain.embed([["a", "b", "c"], ["d", "e"], ["f"]])):
        assert token_cosines(a.reshape(-1, 32), b.reshape(-1, 32)).min() > 0.999


@needs_units
def test_cli_embed_and_export_vectors_in_bf16(tmp_path, capsys):
    inp = tmp_path / "in.txt"
    inp.write_text("\n".join(" ".join(s) for s in _sentences()[:4]) + "\n", encoding="utf-8")
    ckpt = str(FIXTURES / "allennlp")
    for precision in ("fp32", "bf16"):
        assert main(["embed", str(inp), "-o", str(tmp_path / f"{precision}.npz"), "--checkpoint", ckpt,
                     "--device", "cpu", "--precision", precision]) == 0
        # the last line names the precision it ran in, not only the vectors' type (issue 39)
        last = capsys.readouterr().err.strip().splitlines()[-1]
        assert f"float32 vectors computed in {precision})" in last
        assert main(["export", "vectors", str(inp), "-o", str(tmp_path / f"v-{precision}.npz"),
                     "--checkpoint", ckpt, "--device", "cpu", "--precision", precision]) == 0
    a = np.load(tmp_path / "fp32.npz", allow_pickle=False)
    b = np.load(tmp_path / "bf16.npz", allow_pickle=False)
    assert sorted(a.files) == sorted(b.files)
    assert any(a[k].dtype.kind == "f" and a[k].ndim >= 2 for k in a.files)
    for k in (k for k in a.files if a[k].dtype.kind == "f" and a[k].ndim >= 2):
        x, y = a[k].reshape(-1, a[k].shape[-1]), b[k].reshape(-1, b[k].shape[-1])
        assert not np.array_equal(x, y)
        assert token_cosines(x, y).min() > Q001_BOUND


def test_info_says_the_cpu_and_its_bf16_units(capsys):
    ckpt = str(FIXTURES / "allennlp")
    assert main(["info", "--checkpoint", ckpt]) == 0
    text = capsys.readouterr().out
    flags = runtime.cpu_bf16_from_flags()
    assert flags.describe() in text
    assert main(["info", "--checkpoint", ckpt, "--json"]) == 0
    host = json.loads(capsys.readouterr().out)["host"]
    assert host["bf16_units"] == flags.units
    assert host["cpu_precisions"] == (["fp32", "bf16"] if flags.offered else ["fp32"])


@pytest.mark.parametrize("flags, units", [({"avx2"}, None), ({"avx512f", "avx512_bf16"}, "AVX512_BF16"),
                                          ({"avx512f", "avx512_bf16", "amx_bf16"}, "AMX")])
def test_info_reads_the_bf16_units_from_the_cpu_flags(monkeypatch, flags, units):
    monkeypatch.setattr(runtime, "_cpu_flags_and_model", lambda: (flags, "Test CPU"))
    found = runtime.cpu_bf16_from_flags()
    assert found.units == units
    assert found.capability == "" and "torch capability" not in found.describe()
    assert ("bf16 units: " + str(units)) in found.describe() if units else \
        "no bf16 units" in found.describe()


@needs_units
def test_bf16_projection_is_packed_and_equal_to_the_bit():
    """The cell's projection in bf16 uses W_p pre-packed for oneDNN: the same bits as the plain
    bf16 ``mm``; float32 keeps the plain ``mm`` (its results must not move) and packs nothing."""
    from elmo_engine.model.cpu_fast import FastKernels, onednn_packing

    if not onednn_packing():
        pytest.skip("this torch build cannot pre-pack weights for oneDNN")
    gen = torch.Generator().manual_seed(3)
    wp = torch.randn(2, 64, 24, generator=gen) * 0.1                   # (2, D, P)
    m = torch.randn(7, 64, generator=gen)                              # (n, D)
    for dtype, packs in ((torch.bfloat16, True), (torch.float32, False)):
        kernels = FastKernels()
        out = torch.empty(7, 24, dtype=dtype)
        got = kernels.project(0, 1, wp.to(dtype), m.to(dtype), out)
        assert got.data_ptr() == out.data_ptr()
        assert torch.equal(got, torch.mm(m.to(dtype), wp[1].to(dtype)))
        assert (("wp", 0, 1) in kernels.packed_keys()) is packs
    one = FastKernels().project(0, 0, wp.bfloat16(), m[:1].bfloat16(),
                                torch.empty(1, 24, dtype=torch.bfloat16))
    assert torch.equal(one, m[:1].bfloat16() @ wp[0].bfloat16())      # one row: plain GEMV
    model = load_checkpoint(FIXTURES / "allennlp")
    emb = Embedder(model, device="cpu", precision="bf16")
    emb.embed(_sentences()[:3])
    assert any(k[0] == "wp" for k in emb.model.lstm.kernels.packed_keys())


@needs_units
def test_bf16_packs_every_input_projection_with_the_same_bits():
    """In bf16 an input projection of any number of rows uses the packed W_in (the same bits
    as the plain addmm); float32 keeps the plain GEMM above packed_input_max_rows."""
    from elmo_engine.model.cpu_fast import FastKernels, FastPath, onednn_packing

    if not onednn_packing():
        pytest.skip("this torch build cannot pre-pack weights for oneDNN")
    gen = torch.Generator().manual_seed(4)
    w_in = torch.randn(2, 24, 64, generator=gen) * 0.1                 # (2, in, 4D)
    x = torch.randn(40, 24, generator=gen)                             # 40 rows > 8
    bias = torch.randn(64, generator=gen)
    for dtype, packs in ((torch.bfloat16, True), (torch.float32, False)):
        kernels = FastKernels(FastPath(packed_input_max_rows=8))
        got = kernels.input_projection(1, 0, w_in.to(dtype), x.to(dtype), bias.to(dtype))
        plain = torch.addmm(bias.to(dtype), x.to(dtype), w_in[0].to(dtype))
        assert torch.equal(got, plain)
        assert (("w_in", 1, 0) in kernels.packed_keys()) is packs
