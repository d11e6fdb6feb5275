"""File → Get a published model… (docs/guide/models.md) against a loopback server that serves the
vendored AllenNLP test checkpoint under the catalogue's file names for ``small``: the dialog
lists the catalogue, Get downloads with progress and Open loads the model in the workspace (and
the recent list); Cancel mid-download installs nothing and a later Get resumes from the part
file; a 404 is one line; Verify, Remove, Esc, and the dialog's size is remembered."""
from __future__ import annotations

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

import elmo_explorer.shell.dialogs
from elmo_engine.io.catalogue import load_catalogue
from elmo_explorer.shell.main_window import MainWindow
from elmo_explorer.shell.models_dialog.controller import (GetModelDialog,
                                                          show_get_model_dialog)
from elmo_explorer.shell.models_dialog.model import COLUMNS, Busy
from elmo_explorer.state.settings import AppSettings

from support import FIXTURES
from model_server import ModelServer, use_data_folder

pytestmark = [pytest.mark.gui, pytest.mark.usefixtures("torch_one_thread")]

OPTIONS = (FIXTURES / "allennlp" / "options.json").read_bytes()
WEIGHTS = (FIXTURES / "allennlp" / "lm_weights.hdf5").read_bytes()
SMALL = load_catalogue().require("small")


@pytest.fixture()
def store(tmp_path, monkeypatch):
    return use_data_folder(tmp_path / "data", monkeypatch)


@pytest.fixture()
def server(store, monkeypatch):
    files = {SMALL.file("options").path: OPTIONS, SMALL.file("weights").path: WEIGHTS}
    with ModelServer(files) as srv:
        monkeypatch.setenv("ELMO_EXPLORER_MODEL_MIRROR", srv.url)
        yield srv


@pytest.fixture()
def errors(monkeypatch):
    shown = []
    monkeypatch.setattr(elmo_explorer.shell.dialogs, "show_error",
                        lambda parent, title, msg: shown.append((title, msg)))
    return shown


@pytest.fixture()
def window(qtbot, app_settings_dir, errors):
    w = MainWindow(AppSettings(app_settings_dir), views=())
    qtbot.addWidget(w)
    w.show()
    w.start(None, "She sat on the river bank .\n")
    yield w
    w.workspace.worker.shutdown()


def open_dialog(qtbot, window) -> GetModelDialog:
    window.act_get_model.trigger()
    dialog = window.get_model_dialog
    assert dialog.isVisible()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is dialog)   # keys go to the dialog
    return dialog


def cell(dialog, name: str, column: str) -> str:
    for i in range(dialog.table.rowCount()):
        if dialog.table.item(i, 0).text() == name:
            return dialog.table.item(i, COLUMNS.index(column)).text()
    raise AssertionError(f"no row {name}")


def start_slow_download(qtbot, window, server) -> GetModelDialog:
    """Open the dialog and Get ``small`` from a server that sends 2 kB every 50 ms."""
    server.delay_s, server.piece = 0.05, 2048
    dialog = open_dialog(qtbot, window)
    dialog.select("small")
    dialog.get_button.click()
    assert dialog.model.busy is Busy.GETTING
    return dialog


def wait_for_part(qtbot, store, at_least: int) -> None:
    """Until ``small``'s part files hold ``at_least`` bytes (a download is under way)."""
    part = store / "models" / ".incoming" / "small"

    def size(p) -> int:
        try:
            return p.stat().st_size
        except FileNotFoundError:          # finished (renamed) between the listing and the stat
            return 0

    qtbot.waitUntil(lambda: part.is_dir() and sum(size(p) for p in part.glob("*.part"))
                    >= at_least, timeout=30000)


def wait_idle(qtbot, dialog, timeout=60000):
    qtbot.waitUntil(lambda: dialog.model.busy is Busy.IDLE, timeout=timeout)


def test_the_dialog_lists_the_catalogue_with_sizes_and_the_storage(qtbot, window, store, server):
    dialog = open_dialog(qtbot, window)
    names = [dialog.table.item(i, 0).text() for i in range(dialog.table.rowCount())]
    assert names == ["small", "medium", "original", "original-5.5b"]
    assert cell(dialog, "small", "Parameters") == "13.6 M"
    assert cell(dialog, "small", "Download (+ softmax)") == "~54.4 MB"
    assert cell(dialog, "original", "Download (+ softmax)").startswith("~374.4 MB + ~")
    assert cell(dialog, "original", "Memory without / with softmax") == "374.4 MB / 1.2 GB"
    assert cell(dialog, "small", "Architecture") == "2x1024_128_2048cnn_1xhighway"
    assert cell(dialog, "small", "Trained on").startswith("1 Billion Word Benchmark")
    assert cell(dialog, "small", "On disk") == "—"
    assert str(store / "models") in dialog.storage.full_text() and "free" in dialog.storage.full_text()
    dialog.select("small")                      # no softmax published: the box is off
    assert not dialog.softmax.isEnabled() and dialog.get_button.isEnabled()
    assert dialog.get_button.isDefault() and not dialog.open_button.isEnabled()
    dialog.select("original")
    assert dialog.softmax.isEnabled()
    dialog.softmax.setChecked(True)
    dialog.select("small")
    assert not dialog.softmax.isChecked()


def test_get_shows_progress_then_open_loads_the_model(qtbot, window, store, server, errors):
    server.delay_s, server.piece = 0.02, 4096            # slow enough to see progress
    dialog = open_dialog(qtbot, window)
    dialog.select("small")
    seen = []
    orig = dialog.show_progress
    dialog.show_progress = lambda f, text: (seen.append((f, text)), orig(f, text))
    qtbot.keyClick(dialog.table, Qt.Key.Key_Return)      # Enter = Get
    assert dialog.model.busy is Busy.GETTING
    wait_idle(qtbot, dialog)
    assert errors == [] and not dialog.is_error_shown(), dialog.status.text()
    folder = store / "models" / "small"
    assert (folder / SMALL.file("weights").name).read_bytes() == WEIGHTS
    fractions = [f for f, _t in seen if f is not None]
    assert any(0 < f < 1 for f in fractions) and max(fractions) == pytest.approx(1.0)
    assert any("/s" in t and "left" in t and SMALL.file("weights").name in t
               for _f, t in seen), seen[-5:]
    assert cell(dialog, "small", "On disk").startswith("downloaded")
    assert "(size checked)" in cell(dialog, "small", "On disk")
    assert dialog.open_button.isDefault() and not dialog.get_button.isEnabled()
    qtbot.keyClick(dialog.table, Qt.Key.Key_Return)      # Enter = Open
    assert not dialog.isVisible()
    ws = window.workspace
    qtbot.waitUntil(lambda: ws.model_info is not None and ws.model_spec.path == str(folder),
                    timeout=60000)
    assert window.settings.recent_checkpoints()[0] == str(folder)
    qtbot.waitUntil(ws.all_embedded, timeout=60000)
    assert ws.activations[0].shape[0] == 3                 # token layer + 2 LSTM layers


def test_cancel_mid_download_installs_nothing_and_get_resumes(qtbot, window, store, server):
    dialog = start_slow_download(qtbot, window, server)
    wait_for_part(qtbot, store, 8192)
    assert dialog.cancel_button.isVisible() and dialog.cancel_button.isEnabled()
    dialog.cancel_button.click()
    wait_idle(qtbot, dialog)
    assert not (store / "models" / "small").exists()
    assert "cancelled" in dialog.status.text() and "Get resumes" in dialog.status.text()
    assert cell(dialog, "small", "On disk").startswith("partial: ")
    assert dialog.get_button.text() == "&Resume"
    before = len(server.requests)
    server.delay_s = 0.0
    dialog.get_button.click()
    wait_idle(qtbot, dialog)
    assert (store / "models" / "small" / SMALL.file("weights").name).read_bytes() == WEIGHTS
    ranges = [r["range"] for r in server.requests[before:] if r["path"].endswith(".hdf5")]
    assert ranges and ranges[0] and ranges[0].startswith("bytes=") and ranges[0] != "bytes=0-"


def test_a_404_is_one_line_in_the_dialog_and_installs_nothing(qtbot, window, store, monkeypatch,
                                                              errors):
    with ModelServer({}) as srv:
        monkeypatch.setenv("ELMO_EXPLORER_MODEL_MIRROR", srv.url)
        dialog = open_dialog(qtbot, window)
        dialog.select("small")
        dialog.get_button.click()
        wait_idle(qtbot, dialog)
    text = dialog.status.text()
    assert dialog.is_error_shown() and "\n" not in text
    assert "404" in text and SMALL.file("options").path in text
    assert not (store / "models" / "small").exists() and errors == []
    assert dialog.get_button.isEnabled()                   # the app keeps running; try again


def test_verify_then_remove_after_confirmation(qtbot, window, store, server):
    dialog = open_dialog(qtbot, window)
    dialog.select("small")
    dialog.get_button.click()
    wait_idle(qtbot, dialog)
    dialog.verify_button.click()
    wait_idle(qtbot, dialog)
    assert "SHA-256 verified" in cell(dialog, "small", "On disk")
    assert not dialog.is_error_shown()
    weights = store / "models" / "small" / SMALL.file("weights").name
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0xFF                              # same size, one byte flipped
    weights.write_bytes(bytes(data))
    dialog.verify_button.click()
    wait_idle(qtbot, dialog)
    assert dialog.is_error_shown() and "SHA-256" in dialog.status.text()
    assert "verify FAILED" in cell(dialog, "small", "On disk")
    asked = []
    dialog.ask = lambda title, text: (asked.append(text), False)[1]
    dialog.remove_button.click()
    assert asked and (store / "models" / "small").exists()   # "No" keeps it
    dialog.ask = lambda title, text: True
    dialog.remove_button.click()
    wait_idle(qtbot, dialog)
    assert not (store / "models" / "small").exists()
    assert cell(dialog, "small", "On disk") == "—" and "Removed small" in dialog.status.text()


def test_esc_during_a_download_asks_and_the_size_is_remembered(qtbot, window, store, server,
                                                               app_settings_dir):
    dialog = start_slow_download(qtbot, window, server)
    dialog.resize(700, 380)
    dialog.ask = lambda title, text: False
    qtbot.keyClick(dialog, Qt.Key.Key_Escape)
    assert dialog.isVisible() and dialog.model.busy is Busy.GETTING     # "No": keeps going
    dialog.ask = lambda title, text: True
    qtbot.keyClick(dialog, Qt.Key.Key_Escape)
    assert not dialog.isVisible()
    wait_idle(qtbot, dialog)
    assert not (store / "models" / "small").exists()
    other = GetModelDialog(window.workspace.worker, lambda f: None,
                           AppSettings(app_settings_dir), None)
    qtbot.addWidget(other)
    assert (other.width(), other.height()) == (700, 380)
    assert show_get_model_dialog(window) is dialog and dialog.isVisible()


def test_a_deep_data_folder_never_widens_the_dialog(qtbot, tmp_path, monkeypatch, window):
    deep = tmp_path.joinpath(*[f"a-folder-of-the-users-{i}" for i in range(12)], "data")
    use_data_folder(deep, monkeypatch)
    dialog = open_dialog(qtbot, window)
    full = dialog.storage.full_text()
    assert str(deep / "models") in full and dialog.storage.toolTip() == full
    assert dialog.storage.fontMetrics().horizontalAdvance(full) > 1000      # wider than asked below
    dialog.resize(600, 380)
    qtbot.waitUntil(lambda: dialog.width() == 600)
    shown = dialog.storage.text()
    assert "…" in shown and shown != full
    assert dialog.storage.fontMetrics().horizontalAdvance(shown) <= dialog.storage.width()
    assert shown.startswith("Stored in ") and shown.endswith(full[-12:])    # both ends stay readable
    dialog.resize(3000, 380)
    qtbot.waitUntil(lambda: dialog.storage.text() == full)                 # room again: all of it


def test_offline_is_one_line_and_get_works_again_once_the_server_answers(qtbot, window, store,
                                                                         server, monkeypatch):
    import socket

    with socket.socket() as s:                       # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    monkeypatch.setenv("ELMO_EXPLORER_MODEL_MIRROR", dead)
    dialog = open_dialog(qtbot, window)
    dialog.select("small")
    dialog.get_button.click()
    wait_idle(qtbot, dialog)
    text = dialog.status.text()
    assert dialog.is_error_shown() and "\n" not in text and "cannot reach 127.0.0.1" in text
    assert not (store / "models" / "small").exists()
    monkeypatch.setenv("ELMO_EXPLORER_MODEL_MIRROR", server.url)
    dialog.get_button.click()
    wait_idle(qtbot, dialog)
    assert not dialog.is_error_shown() and (store / "models" / "small").is_dir()


def test_quitting_during_a_download_stops_it_and_installs_nothing(qtbot, window, store, server):
    start_slow_download(qtbot, window, server)
    wait_for_part(qtbot, store, 1)
    window.close()
    assert not window.workspace.worker.threads_running()
    assert not (store / "models" / "small").exists()


def test_with_softmax_adds_the_softmax_to_a_downloaded_model(qtbot, window, store, tmp_path,
                                                             monkeypatch):
    import h5py
    import numpy as np

    m = load_catalogue().require("original")
    sm = tmp_path / "sm.hdf5"
    with h5py.File(sm, "w") as fh:                    # the published layout, tiny
        fh.create_dataset("softmax/W", data=np.ones((6, 16), "f4"))
        fh.create_dataset("softmax/b", data=np.zeros(6, "f4"))
    files = {m.file("options").path: OPTIONS, m.file("weights").path: WEIGHTS,
             m.file("softmax").path: sm.read_bytes(),
             m.file("vocab").path: b"<S>\n</S>\n<UNK>\nthe\nbank\nriver\n"}
    with ModelServer(files) as srv:
        monkeypatch.setenv("ELMO_EXPLORER_MODEL_MIRROR", srv.url)
        dialog = open_dialog(qtbot, window)
        dialog.select("original")
        assert dialog.softmax.isEnabled() and not dialog.softmax.isChecked()
        dialog.get_button.click()                     # without the softmax
        wait_idle(qtbot, dialog)
        assert not dialog.is_error_shown(), dialog.status.text()
        assert cell(dialog, "original", "On disk").startswith("downloaded, ")
        assert dialog.open_button.isDefault() and not dialog.get_button.isEnabled()
        dialog.softmax.setChecked(True)
        assert dialog.get_button.isEnabled() and dialog.get_button.text() == "&Get softmax"
        assert dialog.get_button.isDefault()
        dialog.get_button.click()
        wait_idle(qtbot, dialog)
    assert not dialog.is_error_shown(), dialog.status.text()
    assert cell(dialog, "original", "On disk").startswith("downloaded + softmax, ")
    assert "with its softmax" in dialog.status.text()
    assert (store / "models" / "original" / m.file("softmax").name).read_bytes() == sm.read_bytes()
    assert not dialog.softmax.isEnabled()             # nothing more to get
