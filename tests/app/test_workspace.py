"""The workspace: loading models on the worker, incremental embedding, selection, lookups."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pytestqt")

from elmo_explorer.state.workspace import ModelSpec, TokenRef

pytestmark = [pytest.mark.gui, pytest.mark.usefixtures("torch_one_thread")]


def load(qtbot, workspace, path):
    with qtbot.waitSignal(workspace.model_changed, timeout=60000):
        workspace.load_model(ModelSpec(str(path), device="cpu"))


def embed(qtbot, workspace, sentences):
    workspace.set_sentences(sentences)
    qtbot.waitUntil(workspace.all_embedded, timeout=60000)
    qtbot.waitUntil(lambda: not workspace.worker.is_busy(), timeout=5000)


def test_load_and_embed_shapes(qtbot, workspace, tiny_checkpoint):
    load(qtbot, workspace, tiny_checkpoint)
    assert workspace.n_layers == 3 and workspace.device_label == "CPU"
    assert workspace.model_info.parameter_counts["total"] > 0
    embed(qtbot, workspace, ["He sat on the bank of the river.", "", "Hi"])
    assert workspace.tokens == [["He", "sat", "on", "the", "bank", "of", "the", "river", "."], [], ["Hi"]]
    assert [a.shape for a in workspace.activations] == [(3, 9, 32), (3, 0, 32), (3, 1, 32)]
    assert all(a.dtype == np.float32 and not a.flags.writeable for a in workspace.activations)
    # stateless: the same sentence alone gives the same vectors
    first = workspace.activations[0].copy()
    embed(qtbot, workspace, ["He sat on the bank of the river."])
    np.testing.assert_allclose(workspace.activations[0], first, atol=1e-6)


def test_editing_one_line_embeds_only_that_line(qtbot, workspace, tiny_checkpoint):
    load(qtbot, workspace, tiny_checkpoint)
    lines = [f"sentence number {i} about a bank ." for i in range(20)]
    embed(qtbot, workspace, lines)
    misses = workspace.embedder.stats["sentence_misses"]
    before = [a for a in workspace.activations]
    lines[7] = "a completely new line"
    embed(qtbot, workspace, lines)
    assert workspace.embedder.stats["sentence_misses"] - misses == 1
    assert all(workspace.activations[i] is before[i] for i in range(20) if i != 7)
    assert workspace.activations[7].shape == (3, 4, 32)
    # inserting a line shifts the others; they are reused by content, not recomputed
    embed(qtbot, workspace, ["new first line"] + lines)
    assert workspace.embedder.stats["sentence_misses"] - misses == 2
    assert workspace.activations[1] is before[0]


def test_stale_sentences_are_dropped(qtbot, workspace, tiny_checkpoint):
    load(qtbot, workspace, tiny_checkpoint)
    workspace.set_sentences([f"old {i} " * 50 for i in range(200)])
    embed(qtbot, workspace, ["fresh words only", "two"])
    assert workspace.tokens == [["fresh", "words", "only"], ["two"]]
    assert [a.shape[1] for a in workspace.activations] == [3, 1]


def test_bad_checkpoint_keeps_previous_model(qtbot, workspace, tiny_checkpoint, tmp_path):
    load(qtbot, workspace, tiny_checkpoint)
    checksum = workspace.model_info.checksum
    embed(qtbot, workspace, ["a b c"])
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "options.json").write_text((tiny_checkpoint / "options.json").read_text())
    (bad / "lm_weights.hdf5").write_bytes(b"not an hdf5 file at all")
    changed = []
    workspace.model_changed.connect(lambda: changed.append(1))
    with qtbot.waitSignal(workspace.model_load_failed, timeout=10000) as blocker:
        workspace.load_model(ModelSpec(str(bad), device="cpu"))
    path, message = blocker.args
    assert path == str(bad)
    assert "lm_weights.hdf5" in message and "not an HDF5 file" in message
    assert changed == [] and workspace.model_info.checksum == checksum and workspace.all_embedded()


def test_new_model_reembeds_with_its_own_shapes(qtbot, workspace, tiny_checkpoint, tmp_path,
                                                make_checkpoint):
    load(qtbot, workspace, tiny_checkpoint)
    embed(qtbot, workspace, ["one two three"])
    other = make_checkpoint(tmp_path / "one_layer", seed=3, n_layers=1)
    load(qtbot, workspace, other)
    qtbot.waitUntil(workspace.all_embedded, timeout=60000)
    assert workspace.n_layers == 2 and workspace.activations[0].shape == (2, 3, 32)


def test_odd_unicode_and_long_lines(qtbot, workspace, tiny_checkpoint):
    load(qtbot, workspace, tiny_checkpoint)
    odd = ["emoji 😀👍🏽 here", "cafe\u0301 nai\u0308ve", "שלום עולם مرحبا", "tab\tand\x00nul\x07bell",
           "\u200b\u200b", " ".join(["word"] * 300)]
    embed(qtbot, workspace, odd)
    for toks, act in zip(workspace.tokens, workspace.activations):
        assert act.shape == (3, len(toks), 32)
        assert np.isfinite(act).all()
    assert workspace.tokens[1] == ["cafe\u0301", "nai\u0308ve"]
    assert workspace.tokens[4] == [] and len(workspace.tokens[5]) == 300
    assert all("\x00" not in t for t in workspace.tokens[3])


def test_overlong_line_is_truncated_with_a_message(qtbot, workspace, tiny_checkpoint, monkeypatch):
    import elmo_explorer.state.workspace

    monkeypatch.setattr(elmo_explorer.state.workspace, "MAX_LINE_TOKENS", 40)
    load(qtbot, workspace, tiny_checkpoint)
    with qtbot.waitSignal(workspace.message, timeout=60000) as blocker:
        workspace.set_sentences(["x " * 45])
    assert blocker.args[0] == "line 1 has 45 tokens; only the first 40 are used"
    qtbot.waitUntil(workspace.all_embedded, timeout=60000)
    assert workspace.activations[0].shape[1] == 40


def test_overlong_token_is_cut_with_a_message(qtbot, workspace, tiny_checkpoint):
    """Issue 44: a typed or pasted token longer than any model reads (sentence files refuse
    it) is cut to 1,024 characters, so that no view lays out a megabyte of one word."""
    load(qtbot, workspace, tiny_checkpoint)
    word = "a" + "\u0301" * 5000
    with qtbot.waitSignal(workspace.message, timeout=60000) as blocker:
        workspace.set_sentences(["the " + word + " bank"])
    assert blocker.args[0] == ("line 1 has 1 token of more than 1,024 characters; each is cut "
                               "to its first 1,024 (no model reads more)")
    qtbot.waitUntil(workspace.all_embedded, timeout=60000)
    assert workspace.tokens[0] == ["the", word[:1024], "bank"]
    assert workspace.activations[0].shape[1] == 3


def test_selection_and_lookup(qtbot, workspace, tiny_checkpoint):
    load(qtbot, workspace, tiny_checkpoint)
    embed(qtbot, workspace, ["the bank of the river", "a bank loan"])
    assert workspace.occurrences("bank") == [TokenRef(0, 1), TokenRef(1, 1)]
    assert workspace.word_at(TokenRef(1, 2)) == "loan"
    with pytest.raises(IndexError):
        workspace.word_at(TokenRef(5, 0))
    with qtbot.waitSignal(workspace.selection_changed, timeout=1000) as blocker:
        workspace.select(TokenRef(1, 1))
    assert blocker.args == [TokenRef(1, 1)]
    np.testing.assert_array_equal(workspace.vector(TokenRef(1, 1), 2), workspace.activations[1][2, 1])
    workspace.select(TokenRef(9, 9))
    assert workspace.selection is None
    workspace.select(TokenRef(0, 4))
    workspace.set_sentences(["only one"])          # the old selection is out of range now
    assert workspace.selection is None


def test_tokens_without_a_model(qtbot, workspace):
    with qtbot.waitSignal(workspace.tokens_changed, timeout=5000):
        workspace.set_sentences(["I don't know."])
    assert workspace.tokens == [["I", "do", "n't", "know", "."]]
    assert workspace.activations == [None] and not workspace.all_embedded() and workspace.n_layers == 0


def test_gpu_choices_without_a_gpu(qtbot, workspace, tiny_checkpoint):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this checks the CPU-only fallbacks")
    with qtbot.waitSignal(workspace.message, timeout=60000) as blocker:
        workspace.load_model(ModelSpec(str(tiny_checkpoint), device="auto", precision="fp16"))
    assert blocker.args[0] == "fp16 needs a GPU; running in fp32 on the CPU"
    qtbot.waitUntil(lambda: workspace.model_spec is not None, timeout=60000)
    assert workspace.model_spec.precision == "fp32" and workspace.device_label == "CPU"
    # a GPU remembered from another machine (the menu offers none here): the CPU, said once;
    # it loaded no model at all, and the app forgot the checkpoint (a settings attack pass)
    with qtbot.waitSignal(workspace.message, timeout=60000) as blocker:
        workspace.load_model(ModelSpec(str(tiny_checkpoint), device="cuda"))
    assert blocker.args[0] == ("the GPU (CUDA) was asked for (Settings ▸ Device, or the "
                               "workspace), but this machine has none; running on the CPU")
    qtbot.waitUntil(lambda: workspace.model_spec.device == "cpu", timeout=60000)   # what ran
    assert workspace.device_label == "CPU" and workspace.embedder.device.type == "cpu"


def test_bf16_on_the_cpu_where_it_has_bf16_units(qtbot, workspace, tiny_checkpoint, monkeypatch):
    import dataclasses

    import torch
    from elmo_engine import runtime

    if torch.cuda.is_available():
        pytest.skip("this checks the CPU")
    if runtime.cpu_bf16().offered:
        with qtbot.waitSignal(workspace.model_changed, timeout=60000):
            workspace.load_model(ModelSpec(str(tiny_checkpoint), device="cpu", precision="bf16"))
        assert workspace.model_spec.precision == "bf16" and workspace.embedder.dtype == torch.bfloat16
    none = dataclasses.replace(runtime.cpu_bf16(), units=None)
    monkeypatch.setattr(runtime, "cpu_bf16", lambda: none)
    with qtbot.waitSignal(workspace.message, timeout=60000) as blocker:
        workspace.load_model(ModelSpec(str(tiny_checkpoint), device="cpu", precision="bf16"))
    assert blocker.args[0].startswith("bf16 needs a CPU with bf16 units")
    assert blocker.args[0].endswith("; running in fp32")
    qtbot.waitUntil(lambda: workspace.model_spec is not None and workspace.model_spec.precision == "fp32",
                    timeout=60000)
