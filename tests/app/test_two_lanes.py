"""Two lanes: while a probe trains (a long job), an edited sentence is embedded and shown in the
token table within a second of the typing pause (the interactive lane never waits behind it)."""
from __future__ import annotations

import pytest
from PySide6.QtGui import QTextCursor

from app_helpers import tiny_probe_task
from elmo_engine.analysis.probes.experiment import ProbeConfig
from elmo_explorer.shell.main_window import MainWindow
from elmo_explorer.state.settings import AppSettings
from elmo_explorer.state.worker import Lane

pytestmark = [pytest.mark.gui, pytest.mark.usefixtures("torch_one_thread")]

TEXT = "He sat on the bank of the river.\nShe deposited the check at the bank.\nplay\n"


def test_an_edited_sentence_is_shown_within_a_second_while_a_probe_trains(
        qtbot, app_settings_dir, tiny_checkpoint):
    w = MainWindow(AppSettings(app_settings_dir), views=("probes",))
    qtbot.addWidget(w)
    w.show()
    w.start(str(tiny_checkpoint), TEXT)
    ws, probes, sentences = w.workspace, w.panels["probes"], w.sentences
    try:
        qtbot.waitUntil(ws.all_embedded, timeout=60000)
        endless = ProbeConfig(epochs=10_000, patience=10_000, batch_size=4)
        with qtbot.waitSignal(probes.training_event, timeout=60000,
                              check_params_cb=lambda e: e["phase"] == "layers"):
            job = probes.run_tasks([tiny_probe_task()], config=endless)
        assert job.lane is Lane.LONG and job.active

        cursor = QTextCursor(sentences.editor.document().findBlockByNumber(2))
        cursor.movePosition(QTextCursor.MoveOperation.EndOfBlock)
        sentences.editor.setTextCursor(cursor)
        cursor.insertText(" the piano")
        assert sentences.pending_edit()
        with qtbot.waitSignal(ws.sentences_changed, timeout=3000):    # the typing pause ends
            pass
        assert not ws.all_embedded()
        qtbot.waitUntil(ws.all_embedded, timeout=1000)                # embedded within 1 s …
        qtbot.waitUntil(lambda: sentences.model.rowCount() == 3
                        and "embedding" not in sentences.header.text(), timeout=1000)  # … shown
        assert ws.tokens[2] == ["play", "the", "piano"] and ws.activations[2].shape[1] == 3
        assert job.active                                             # the probe still trains
    finally:
        probes.cancel()
        assert ws.worker.shutdown(timeout_s=10)


def test_a_long_embedding_held_mid_batch_and_a_typed_sentence_both_get_their_own_vectors(
        qtbot, app_settings_dir, tiny_checkpoint, monkeypatch):
    """The two lanes really overlap on the workspace's one embedder: a long job (what a probe's
    embedding does) is held inside its forward pass, after its input projection is written and
    before the recurrence reads it; meanwhile an edited sentence is embedded on the
    interactive lane. Both equal the same embeddings made alone (before the engine's
    concurrency contract the long job's vectors were another batch's)."""
    import dataclasses
    import threading

    import numpy as np

    from elmo_engine.embed.embedder import Embedder
    from elmo_engine.model.cpu_fast import FastKernels

    w = MainWindow(AppSettings(app_settings_dir), views=("probes",))
    qtbot.addWidget(w)
    w.show()
    w.start(str(tiny_checkpoint), TEXT)
    ws, sentences = w.workspace, w.sentences
    release, mid_batch = threading.Event(), threading.Event()
    try:
        qtbot.waitUntil(ws.all_embedded, timeout=60000)
        model = ws.embedder.model
        # every input projection through the scratch buffers, as large batches do
        model.fast_path = dataclasses.replace(model.fast_path, packed_input_max_rows=0)
        long_sents = [("the", "bank", "of", "the", "river", "was", "steep", "."),
                      ("she", "paid", "money", "into", "the", "bank", "."),
                      ("they", "played", "by", "the", "old", "mill", ".")] * 3
        long_sents = [s + ("x",) * k for k, s in enumerate(long_sents)]      # all different
        alone = Embedder(model, device="cpu", cache_size=0)
        expected_long = alone.embed(long_sents)
        expected_typed = alone.embed([["play", "the", "piano"]])[0]
        projection = FastKernels.input_projection
        marker = threading.local()

        def holding(self, layer, d, w_in, x, bias):
            out = projection(self, layer, d, w_in, x, bias)
            if getattr(marker, "hold", False) and layer == 1 and not mid_batch.is_set():
                mid_batch.set()
                assert release.wait(60)          # the typed sentence runs meanwhile
            return out

        monkeypatch.setattr(FastKernels, "input_projection", holding)
        embedder = ws.embedder

        def long_job(state):
            marker.hold = True
            return embedder.embed(long_sents, state)

        got = []
        job = ws.worker.group("probes").submit("a probe's embedding", long_job,
                                               lane=Lane.LONG, on_done=got.append)
        assert mid_batch.wait(30)                # the long job is inside its forward pass

        cursor = QTextCursor(sentences.editor.document().findBlockByNumber(2))
        cursor.movePosition(QTextCursor.MoveOperation.EndOfBlock)
        sentences.editor.setTextCursor(cursor)
        cursor.insertText(" the piano")
        with qtbot.waitSignal(ws.sentences_changed, timeout=3000):
            pass
        qtbot.waitUntil(ws.all_embedded, timeout=10000)     # while the long job is held
        assert not job.finished and ws.tokens[2] == ["play", "the", "piano"]
        typed = ws.activations[2]

        release.set()
        qtbot.waitUntil(lambda: bool(got), timeout=30000)
        np.testing.assert_allclose(typed, expected_typed, atol=1e-6, rtol=0)
        for g, e in zip(got[0], expected_long):
            np.testing.assert_allclose(g, e, atol=1e-6, rtol=0)
    finally:
        release.set()
        assert ws.worker.shutdown(timeout_s=10)
