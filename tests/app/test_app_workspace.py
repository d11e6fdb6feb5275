"""The workspace: loading models on the worker, incremental embedding, selection, lookups."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pytestqt")

from elmo_explorer.state.workspace import ModelSpec, TokenRef, Workspace  # noqa: E402

pytestmark = [pytest.mark.gui, pytest.mark.usefixtures("torch_one_thread")]


@pytest.fixture
def ws(qtbot):
    w = Workspace()
    yield w
    assert w.worker.shutdown(timeout_s=5)


def load(qtbot, ws, path):
    with qtbot.waitSignal(ws.model_changed, timeout=60000):
        ws.load_model(ModelSpec(str(path), device="cpu"))


def embed(qtbot, ws, sentences):
    ws.set_sentences(sentences)
    qtbot.waitUntil(ws.all_embedded, timeout=60000)
    qtbot.waitUntil(lambda: not ws.worker.is_busy(), timeout=5000)


def test_load_and_embed_shapes(qtbot, ws, tiny_checkpoint):
    load(qtbot, ws, tiny_checkpoint)
    assert ws.n_layers == 3 and ws.device_label == "CPU"
    assert ws.model_info.parameter_counts["total"] > 0
    embed(qtbot, ws, ["He sat on the bank of the river.", "", "Hi"])
    assert ws.tokens == [["He", "sat", "on", "the", "bank", "of", "the", "river", "."], [], ["Hi"]]
    assert [a.shape for a in ws.activations] == [(3, 9, 32), (3, 0, 32), (3, 1, 32)]
    assert all(a.dtype == np.float32 and not a.flags.writeable for a in ws.activations)
    # stateless: the same sentence alone gives the same vectors
    first = ws.activations[0].copy()
    embed(qtbot, ws, ["He sat on the bank of the river."])
    np.testing.assert_allclose(ws.activations[0], first, atol=1e-6)


def test_editing_one_line_embeds_only_that_line(qtbot, ws, tiny_checkpoint):
    load(qtbot, ws, tiny_checkpoint)
    lines = [f"sentence number {i} about a bank ." for i in range(20)]
    embed(qtbot, ws, lines)
    misses = ws.embedder.stats["sentence_misses"]
    before = [a for a in ws.activations]
    lines[7] = "a completely new line"
    embed(qtbot, ws, lines)
    assert ws.embedder.stats["sentence_misses"] - misses == 1
    assert all(ws.activations[i] is before[i] for i in range(20) if i != 7)
    assert ws.activations[7].shape == (3, 4, 32)
    # inserting a line shifts the others; they are reused by content, not recomputed
    embed(qtbot, ws, ["new first line"] + lines)
    assert ws.embedder.stats["sentence_misses"] - misses == 2
    assert ws.activations[1] is before[0]


def test_stale_sentences_are_dropped(qtbot, ws, tiny_checkpoint):
    load(qtbot, ws, tiny_checkpoint)
    ws.set_sentences([f"old {i} " * 50 for i in range(200)])
    embed(qtbot, ws, ["fresh words only", "two"])
    assert ws.tokens == [["fresh", "words", "only"], ["two"]]
    assert [a.shape[1] for a in ws.activations] == [3, 1]


def test_bad_checkpoint_keeps_previous_model(qtbot, ws, tiny_checkpoint, tmp_path):
    load(qtbot, ws, tiny_checkpoint)
    checksum = ws.model_info.checksum
    embed(qtbot, ws, ["a b c"])
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "options.json").write_text((tiny_checkpoint / "options.json").read_text())
    (bad / "lm_weights.hdf5").write_bytes(b"not an hdf5 file at all")
    changed = []
    ws.model_changed.connect(lambda: changed.append(1))
    with qtbot.waitSignal(ws.model_load_failed, timeout=10000) as blocker:
        ws.load_model(ModelSpec(str(bad), device="cpu"))
    path, message = blocker.args
    assert path == str(bad)
    assert "lm_weights.hdf5" in message and "not an HDF5 file" in message
    assert changed == [] and ws.model_info.checksum == checksum and ws.all_embedded()


def test_new_model_reembeds_with_its_own_shapes(qtbot, ws, tiny_checkpoint, tmp_path):
    from conftest import write_tiny_checkpoint

    load(qtbot, ws, tiny_checkpoint)
    embed(qtbot, ws, ["one two three"])
    other = write_tiny_checkpoint(tmp_path / "one_layer", seed=3, n_layers=1)
    load(qtbot, ws, other)
    qtbot.waitUntil(ws.all_embedded, timeout=60000)
    assert ws.n_layers == 2 and ws.activations[0].shape == (2, 3, 32)


def test_odd_unicode_and_long_lines(qtbot, ws, tiny_checkpoint):
    load(qtbot, ws, tiny_checkpoint)
    odd = ["emoji 😀👍🏽 here", "cafe\u0301 nai\u0308ve", "שלום עולם مرحبا", "tab\tand\x00nul\x07bell",
           "\u200b\u200b", " ".join(["word"] * 300)]
    embed(qtbot, ws, odd)
    for toks, act in zip(ws.tokens, ws.activations):
        assert act.shape == (3, len(toks), 32)
        assert np.isfinite(act).all()
    assert ws.tokens[1] == ["cafe\u0301", "nai\u0308ve"]
    assert ws.tokens[4] == [] and len(ws.tokens[5]) == 300
    assert all("\x00" not in t for t in ws.tokens[3])


def test_overlong_line_is_truncated_with_a_message(qtbot, ws, tiny_checkpoint, monkeypatch):
    import elmo_explorer.state.workspace

    monkeypatch.setattr(elmo_explorer.state.workspace, "MAX_LINE_TOKENS", 40)
    load(qtbot, ws, tiny_checkpoint)
    with qtbot.waitSignal(ws.message, timeout=60000) as blocker:
        ws.set_sentences(["x " * 45])
    assert blocker.args[0] == "line 1 has 45 tokens; only the first 40 are used"
    qtbot.waitUntil(ws.all_embedded, timeout=60000)
    assert ws.activations[0].shape[1] == 40


def test_selection_and_lookup(qtbot, ws, tiny_checkpoint):
    load(qtbot, ws, tiny_checkpoint)
    embed(qtbot, ws, ["the bank of the river", "a bank loan"])
    assert ws.occurrences("bank") == [TokenRef(0, 1), TokenRef(1, 1)]
    assert ws.word_at(TokenRef(1, 2)) == "loan"
    with pytest.raises(IndexError):
        ws.word_at(TokenRef(5, 0))
    with qtbot.waitSignal(ws.selection_changed, timeout=1000) as blocker:
        ws.select(TokenRef(1, 1))
    assert blocker.args == [TokenRef(1, 1)]
    np.testing.assert_array_equal(ws.vector(TokenRef(1, 1), 2), ws.activations[1][2, 1])
    ws.select(TokenRef(9, 9))
    assert ws.selection is None
    ws.select(TokenRef(0, 4))
    ws.set_sentences(["only one"])          # the old selection is out of range now
    assert ws.selection is None


def test_tokens_without_a_model(qtbot, ws):
    with qtbot.waitSignal(ws.tokens_changed, timeout=5000):
        ws.set_sentences(["I don't know."])
    assert ws.tokens == [["I", "do", "n't", "know", "."]]
    assert ws.activations == [None] and not ws.all_embedded() and ws.n_layers == 0


def test_gpu_choices_without_a_gpu(qtbot, ws, tiny_checkpoint):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this checks the CPU-only fallbacks")
    with qtbot.waitSignal(ws.message, timeout=60000) as blocker:
        ws.load_model(ModelSpec(str(tiny_checkpoint), device="auto", precision="fp16"))
    assert blocker.args[0] == "fp16 needs a GPU; running in fp32 on the CPU"
    qtbot.waitUntil(lambda: ws.model_spec is not None, timeout=60000)
    assert ws.model_spec.precision == "fp32" and ws.device_label == "CPU"
    with qtbot.waitSignal(ws.model_load_failed, timeout=60000) as failed:
        ws.load_model(ModelSpec(str(tiny_checkpoint), device="cuda"))
    assert "no CUDA device" in failed.args[1]
    assert ws.model_spec.device == "auto"                     # the CPU model stays


def test_bf16_on_the_cpu_where_it_has_bf16_units(qtbot, ws, tiny_checkpoint, monkeypatch):
    import dataclasses

    import torch
    from elmo_engine import runtime

    if torch.cuda.is_available():
        pytest.skip("this checks the CPU")
    if runtime.cpu_bf16().offered:
        with qtbot.waitSignal(ws.model_changed, timeout=60000):
            ws.load_model(ModelSpec(str(tiny_checkpoint), device="cpu", precision="bf16"))
        assert ws.model_spec.precision == "bf16" and ws.embedder.dtype == torch.bfloat16
    none = dataclasses.replace(runtime.cpu_bf16(), units=None)
    monkeypatch.setattr(runtime, "cpu_bf16", lambda: none)
    with qtbot.waitSignal(ws.message, timeout=60000) as blocker:
        ws.load_model(ModelSpec(str(tiny_checkpoint), device="cpu", precision="bf16"))
    assert blocker.args[0].startswith("bf16 needs a CPU with bf16 units")
    assert blocker.args[0].endswith("; running in fp32")
    qtbot.waitUntil(lambda: ws.model_spec is not None and ws.model_spec.precision == "fp32",
                    timeout=60000)
