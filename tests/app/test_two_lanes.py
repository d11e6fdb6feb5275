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
