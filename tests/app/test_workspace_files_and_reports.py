"""File → Save/Open workspace, Export vectors/report, autosave and recovery (offscreen Qt)."""
from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path
from types import SimpleNamespace

import h5py
import numpy as np
import pytest

pytest.importorskip("pytestqt")

import pyqtgraph as pg
from PySide6.QtCore import Signal
from PySide6.QtGui import QImage
from PySide6.QtWidgets import (QFileDialog, QMenu, QMessageBox, QVBoxLayout,
                               QWidget)

import elmo_explorer.persistence.workspace_actions as wa
from elmo_explorer.views.protocol import AnalysisPanel
from elmo_explorer.common.figure_export import FigureOptions, VectorDialog
from elmo_explorer.shell.main_window import MainWindow
from elmo_explorer.state.settings import AppSettings
from elmo_explorer.state.workspace import TokenRef
from elmo_engine.errors import InputError
from elmo_engine.io import recovery
from elmo_engine.io import workspace_file as wf

pytestmark = [pytest.mark.gui, pytest.mark.usefixtures("torch_one_thread")]

TEXT = "He sat on the bank of the river.\nShe deposited the check at the bank.\n"
Yes, No = QMessageBox.StandardButton.Yes, QMessageBox.StandardButton.No


class FakePanel(QWidget):
    """A view with a labelled plot, view state, probe runs and (optionally) its own report
    figures: the AnalysisPanel protocol."""

    title = "Fake"
    ready = Signal()

    def __init__(self):
        super().__init__()
        self.jobs = SimpleNamespace(name="fake")       # the job group's name is all it is asked
        self.state = {"layer": 2, "umap": {"n_neighbors": 15}}
        self.restored = None
        self.runs = []
        self.plot = pg.PlotWidget(background="w")
        self.plot.setTitle("Similarity per layer", color="k")
        self.plot.addLegend(labelTextColor="k")
        self.plot.plot([0, 1, 2], [0.9, 0.6, 0.4], pen=pg.mkPen("#2471a3", width=2), symbol="o",
                       name="bank")
        for side, label in (("bottom", "layer"), ("left", "self-similarity")):
            axis = self.plot.getAxis(side)
            axis.enableAutoSIPrefix(False)
            axis.setPen("k")
            axis.setTextPen("k")
            self.plot.setLabel(side, label, color="k")
        QVBoxLayout(self).addWidget(self.plot)

    def is_ready(self):
        return True

    def export_actions(self):
        return []

    def view_state(self):
        return dict(self.state)

    def restore_view_state(self, state):
        self.restored = state

    def probe_runs(self):
        return [r.to_dict() for r in self.runs]

    def restore_probe_runs(self, runs):
        pass


@pytest.fixture
def window(qtbot, app_settings_dir, tiny_checkpoint):
    w = MainWindow(AppSettings(app_settings_dir), views=())
    qtbot.addWidget(w)
    w.panels["fake"] = FakePanel()
    w.show()
    w.errors = []
    w.show_error = lambda title, msg: w.errors.append((title, msg))
    w.start(str(tiny_checkpoint), TEXT)
    qtbot.waitUntil(w.workspace.all_embedded, timeout=60000)
    w.actions_ = wa.install_workspace_actions(w, recover=False)
    yield w
    w.workspace.worker.shutdown()


def test_the_fake_panel_is_an_analysis_panel(window):
    assert isinstance(window.panels["fake"], AnalysisPanel)


def test_menu_entries_and_shortcuts(window):
    file_menu = window.menus["file"] if hasattr(window, "menus") else next(
        m for m in window.menuBar().findChildren(QMenu) if m.title() == "&File")
    texts = [a.text() for a in file_menu.actions()]
    for t in ("Save &workspace…", "Open wor&kspace…", "Export &vectors…", "Export &report…"):
        assert t in texts
    acts = window.actions_.actions
    assert acts["save"].shortcut().toString() == "Ctrl+Shift+S"
    assert acts["report"].shortcut().toString() == "Ctrl+Shift+R"
    assert texts.index("Export &report…") < texts.index("&Quit")


def test_save_and_open_round_trip(qtbot, window, tmp_path):
    ws, actions = window.workspace, window.actions_
    ws.select(TokenRef(1, 6))
    assert ws.word_at(TokenRef(1, 6)) == "bank" and actions.is_dirty()
    path = tmp_path / "a.elmows.json"
    with qtbot.waitSignal(actions.saved, timeout=10000):
        actions.save_workspace(path)
    assert not actions.is_dirty()
    obj = json.loads(path.read_text(encoding="utf-8"))
    assert obj["sentences"] == TEXT.strip().split("\n") and obj["views"]["fake"]["layer"] == 2
    assert obj["selection"] == {"sentence": 1, "token": 6, "word": "bank"}
    assert obj["checkpoint"]["checksum"] == ws.model_info.checksum
    window.sentences.set_text("Something else entirely.\n")
    qtbot.waitUntil(ws.all_embedded, timeout=10000)
    # the old selection is gone: the app selects the new text's default word (its first token)
    assert ws.selection == TokenRef(0, 0) and actions.is_dirty()
    with qtbot.waitSignal(actions.restored, timeout=60000):
        actions.open_workspace(path)
    assert ws.sentences == TEXT.strip().split("\n") and ws.selection == TokenRef(1, 6)
    assert window.panels["fake"].restored == {"layer": 2, "umap": {"n_neighbors": 15}}
    assert not actions.is_dirty() and window.errors == []


def test_moved_checkpoint_asks_and_checksum_mismatch_warns(qtbot, window, tmp_path, monkeypatch,
                                                           tiny_checkpoint):
    actions, ws = window.actions_, window.workspace
    asked = []
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: asked.append(a[2]) or No)
    moved = tmp_path / "moved.elmows.json"
    wf.save_workspace(moved, wf.WorkspaceData(
        sentences=["a bank"], checkpoint=wf.CheckpointRef(str(tmp_path / "gone"), "00")))
    with qtbot.waitSignal(actions.restored, timeout=60000):
        actions.open_workspace(moved)
    assert "gone" in asked[0] and "Locate it?" in asked[0]
    # No keeps the loaded model: the question says so (it said "without a model")
    assert f"with the model loaded now ({tiny_checkpoint.name})" in asked[0]
    assert "without a model" not in asked[0]
    assert ws.sentences == ["a bank"] and ws.model_spec.path == str(tiny_checkpoint)
    warned = []
    answer = [QMessageBox.StandardButton.Cancel]
    monkeypatch.setattr(QMessageBox, "warning", lambda *a, **k: warned.append(a[2]) or answer[0])
    other = tmp_path / "other.elmows.json"
    wf.save_workspace(other, wf.WorkspaceData(
        sentences=["the other bank"], checkpoint=wf.CheckpointRef(str(tiny_checkpoint), "ab" * 32)))
    with qtbot.waitSignal(ws.worker.idle, timeout=10000):
        actions.open_workspace(other)
    assert "checksum differs" in warned[0] and ws.sentences == ["a bank"]       # cancelled
    answer[0] = QMessageBox.StandardButton.Open
    with qtbot.waitSignal(actions.restored, timeout=60000):
        actions.open_workspace(other)
    assert ws.sentences == ["the other bank"] and window.errors == []


def test_export_vectors_asks_before_overwriting(qtbot, window, tmp_path, monkeypatch):
    actions, ws = window.actions_, window.workspace
    ws.select(TokenRef(0, 4))
    out = tmp_path / "bank.hdf5"
    with qtbot.waitSignal(actions.exported, timeout=10000):
        actions.export_vectors(out, {"fmt": "hdf5", "layers": "top", "scope": "word"})
    with h5py.File(out, "r") as fh:
        assert fh["vectors"].shape == (2, 32) and list(fh["sentence"][()]) == [0, 1]
        np.testing.assert_array_equal(fh["vectors"][1], ws.activations[1][-1, 6])
    before = out.read_bytes()
    monkeypatch.setattr(VectorDialog, "exec", lambda self: 1)
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(out), ""))
    asked = []
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: asked.append(a[2]) or No)
    actions.ask_export_vectors()
    assert "exists already" in asked[0] and out.read_bytes() == before and not ws.worker.is_busy()
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: Yes)
    with qtbot.waitSignal(actions.exported, timeout=10000):
        actions.ask_export_vectors()                   # dialog defaults: HDF5, every layer, all
    with h5py.File(out, "r") as fh:
        assert fh["0"].shape == (3, 9, 32) and "sentence_to_index" in fh


def test_disk_full_error_is_shown_and_nothing_left(qtbot, window, tmp_path, monkeypatch):
    def full(_fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    window.actions_.export_vectors(tmp_path / "v.npz", {"fmt": "npz", "layers": "average"})
    qtbot.waitUntil(lambda: bool(window.errors), timeout=10000)
    title, message = window.errors[0]
    assert title == "Cannot export the vectors" and "No space left" in message
    assert str(tmp_path / "v.npz") in message
    assert [p.name for p in tmp_path.iterdir()] == ["settings"]           # no file, no temporary


def _csv_rows(path):
    import csv

    with open(path, encoding="utf-8") as fh:
        return list(csv.reader(fh))


def test_the_app_and_export_report_write_the_same_report(qtbot, window, tmp_path):
    """One code path: the app's Export report… and ``export report`` of the saved workspace
    give the same files (names, tables, PNG sizes), figures at the dialog's width and dpi."""
    from PIL import Image

    from elmo_engine.cli.main import main

    window.panels["own"] = FakePanel()
    layers, projection = FakePanel(), FakePanel()                # the views' saved states
    code = {"name": "layer 0", "layer": 0, "online_codelength_bits": 420.0,
            "uniform_codelength_bits": 900.0, "compression": 900.0 / 420.0,
            "final_block_accuracy": 0.7}
    layers.state = {"version": 1, "mdl": {"demo-pos": {
        "task": "demo-pos", "examples": 120, "classes": 9, "mix": None,
        "layers": [code, dict(code, name="layer 1", layer=1, online_codelength_bits=300.0)]}}}
    projection.state = {"version": 1, "umap": {"n_neighbors": 5, "min_dist": 0.1, "seed": 3}}
    window.panels["layers"], window.panels["projection"] = layers, projection
    window.workspace.select(TokenRef(0, 4))                       # "bank"
    ws_path = tmp_path / "w.elmows.json"
    wf.save_workspace(ws_path, window.actions_.collect())
    app_out, cli_out = tmp_path / "app", tmp_path / "cli"
    opts = FigureOptions(width_in=3.0, height_in=2.0, dpi=100, keep_aspect=True)
    with qtbot.waitSignal(window.actions_.exported, timeout=60000):
        window.actions_.export_report(app_out, opts)
    assert window.errors == []
    assert main(["export", "report", str(ws_path), "-o", str(cli_out), "--width-in", "3",
                 "--dpi", "100", "--device", "cpu"]) == 0

    def files(root):
        return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())

    assert files(app_out) == files(cli_out)
    figs = [f for f in files(app_out) if f.startswith("figures/")]
    assert "figures/contexts_bank_heatmaps.png" in figs and "figures/own_plot.svg" not in figs
    assert "figures/layers_mdl.png" in figs                      # the report's own parts
    assert [f for f in figs if f.startswith("figures/projection_") and f.endswith(".png")]
    for f in figs:
        if f.endswith(".png"):
            with Image.open(app_out / f) as a, Image.open(cli_out / f) as b:
                assert a.size == b.size and a.size[0] == 300        # 3 in × 100 dpi
    tables = [f for f in files(app_out) if f.startswith("tables/")]
    assert {"tables/contexts_summary.csv", "tables/contexts_neighbours.csv",
            "tables/layers_mdl.csv"} <= set(tables)
    mdl = _csv_rows(app_out / "tables/layers_mdl.csv")
    assert [r[:3] for r in mdl[1:]] == [["demo-pos", "layer 0", "0.42"],
                                        ["demo-pos", "layer 1", "0.3"]]
    for f in tables:
        a, b = _csv_rows(app_out / f), _csv_rows(cli_out / f)
        assert len(a) == len(b) and a[0] == b[0]
        for ra, rb in zip(a[1:], b[1:]):
            for x, y in zip(ra, rb):
                try:
                    assert float(x) == pytest.approx(float(y), abs=2e-4)
                except ValueError:
                    assert x == y
    page = (app_out / "report.html").read_text(encoding="utf-8")
    assert "3 in wide at 100 dpi" in page and "bank" in page
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(app_out.stat().st_mode) == 0o777 & ~mask


def test_autosave_and_recovery(qtbot, window, tmp_path, monkeypatch, app_settings_dir):
    actions = window.actions_
    window.workspace.select(TokenRef(0, 1))
    with qtbot.waitSignal(actions.autosaved, timeout=10000) as blocker:
        assert actions.autosave() is not None
    auto = Path(blocker.args[0])
    assert auto == recovery.autosave_path(actions.autosave_dir) and auto.is_file()
    assert actions.autosave() is None                         # nothing changed since
    obj = json.loads(auto.read_text(encoding="utf-8"))
    obj["session"]["pid"] = 2 ** 22 + 4321                    # as if that session crashed
    auto.write_text(json.dumps(obj), encoding="utf-8")
    window.sentences.set_text("Unrelated text.\n")
    qtbot.waitUntil(window.workspace.all_embedded, timeout=10000)
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: Yes)
    with qtbot.waitSignal(actions.restored, timeout=60000):
        actions.check_recovery()
    assert window.workspace.sentences == TEXT.strip().split("\n")
    assert window.workspace.selection == TokenRef(0, 1) and actions.is_dirty()
    window.close()                                            # a clean exit removes the autosave
    assert not auto.exists()


def test_a_recovered_autosave_of_another_window_is_taken_over_and_a_running_ones_kept(
        qtbot, window, monkeypatch):
    """Each window autosaves to a file of its own: the recovered one of a crashed window goes
    once this window's autosave holds its work; a running window's file outlives this window's
    clean exit (one shared file was written over, and removed by the first clean exit)."""
    import subprocess
    import sys

    actions = window.actions_
    folder = actions.autosave_dir
    crashed = recovery.autosave_path(folder, 2 ** 22 + 4321)
    wf.save_workspace(crashed, wf.WorkspaceData(sentences=["The crashed window's bank ."]))
    doc = json.loads(crashed.read_text(encoding="utf-8"))
    doc["session"] = {"pid": 2 ** 22 + 4321, "host": recovery._host()}
    crashed.write_text(json.dumps(doc), encoding="utf-8")
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        running = recovery.autosave_path(folder, other.pid)
        wf.save_workspace(running, wf.WorkspaceData(sentences=["Another window's text ."]))
        doc = json.loads(running.read_text(encoding="utf-8"))
        doc["session"] = {"pid": other.pid, "host": recovery._host()}
        running.write_text(json.dumps(doc), encoding="utf-8")
        monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: Yes)
        with qtbot.waitSignal(actions.restored, timeout=60000):
            actions.check_recovery()                          # the crashed one, not the running
        assert window.workspace.sentences == ["The crashed window's bank ."]
        assert crashed.exists()                               # until this window's autosave
        with qtbot.waitSignal(actions.autosaved, timeout=10000) as blocker:
            assert actions.autosave() is not None
        own = Path(blocker.args[0])
        assert own == recovery.autosave_path(folder) and own.is_file() and own != crashed
        assert not crashed.exists() and running.exists()
        window.close()
        assert not own.exists() and running.exists()          # the other window's is its own
        assert json.loads(running.read_text(encoding="utf-8"))["sentences"] == [
            "Another window's text ."]
    finally:
        other.kill()
        other.wait()


def _crashed_autosave(folder, pid=2 ** 22 + 4321, sentence="The crashed window's bank ."):
    path = recovery.autosave_path(folder, pid)
    wf.save_workspace(path, wf.WorkspaceData(sentences=[sentence]))
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["session"] = {"pid": pid, "host": recovery._host()}
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_a_recovered_autosave_that_was_not_opened_stays_for_the_next_start(
        qtbot, window, monkeypatch):
    """A review: the recovered file was marked as taken before it opened; when the open failed
    (or a checksum question was cancelled), the next autosave of unrelated work, or the clean
    exit, deleted the crashed session's work."""
    actions = window.actions_
    crashed = _crashed_autosave(actions.autosave_dir)
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: Yes)
    real_load = wf.load_workspace

    def fails(path, *a, **k):
        if Path(path) == crashed:
            raise InputError("cannot read it (a test)", path=path)
        return real_load(path, *a, **k)

    monkeypatch.setattr(wf, "load_workspace", fails)
    actions.check_recovery()
    qtbot.waitUntil(lambda: bool(window.errors), timeout=30000)
    assert actions.adopted is None and crashed.exists()
    assert not crashed.with_name(crashed.name + recovery.CLAIM_SUFFIX).exists()   # released
    window.workspace.select(TokenRef(0, 1))
    with qtbot.waitSignal(actions.autosaved, timeout=10000):
        assert actions.autosave() is not None
    assert crashed.exists()
    window.close()
    assert crashed.exists() and recovery.find_recovery(actions.autosave_dir).path == crashed


def test_no_autosave_while_a_recovered_workspace_is_restored(qtbot, window, monkeypatch):
    """A review: an autosave while the recovered workspace was still loading wrote a partial
    state and deleted the recovered file: a crash then lost the work."""
    actions = window.actions_
    crashed = _crashed_autosave(actions.autosave_dir)
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: Yes)
    monkeypatch.setattr(actions, "try_finish_restore", lambda force=False: None)  # held
    actions.check_recovery()
    qtbot.waitUntil(lambda: actions.pending is not None, timeout=30000)
    window.workspace.select(TokenRef(0, 0))
    assert actions.autosave() is None                     # nothing written mid-restore
    assert crashed.exists() and actions.adopted == crashed and not actions.adopted_restored
    window.close()                                        # the restore never finished
    assert crashed.exists() and recovery.find_recovery(actions.autosave_dir).path == crashed


def test_an_autosave_of_this_process_id_is_recovered_in_place(qtbot, window, monkeypatch):
    """A process id used again: the crashed file is this window's own autosave path; recovered,
    this window's autosave replaces it there and the claim goes; declined, it is removed."""
    import os

    actions = window.actions_
    own = _crashed_autosave(actions.autosave_dir, pid=os.getpid())
    doc = json.loads(own.read_text(encoding="utf-8"))
    doc["session"]["pid"] = 2 ** 22 + 7                   # written by the earlier process
    own.write_text(json.dumps(doc), encoding="utf-8")
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: Yes)
    with qtbot.waitSignal(actions.restored, timeout=60000):
        actions.check_recovery()
    assert actions.adopted == own and actions.adopted_restored
    window.workspace.select(TokenRef(0, 0))
    with qtbot.waitSignal(actions.autosaved, timeout=10000) as blocker:
        assert actions.autosave() is not None
    assert Path(blocker.args[0]) == own and own.exists() and actions.adopted is None
    assert not own.with_name(own.name + recovery.CLAIM_SUFFIX).exists()
    assert json.loads(own.read_text(encoding="utf-8"))["session"]["pid"] == os.getpid()


def test_save_figure_size_dpi_formats_and_umask(tmp_path):
    """App exports go through the engine's figure path at the dialog's size and DPI."""
    from elmo_engine.io import figures as F
    from elmo_explorer.common.figure_export import save_figure

    fig, ax = F.new_figure(3.0, 2.0)
    ax.plot([0, 1, 2], [3, 1, 2], label="curve")
    files = save_figure(fig, tmp_path / "plot", FigureOptions(4.0, 3.0, 150, keep_aspect=False,
                                                              formats=("png", "svg", "pdf")))
    assert [f.name for f in files] == ["plot.png", "plot.svg", "plot.pdf"]
    img = QImage(str(files[0]))
    assert round(img.dotsPerMeterX() * 0.0254) == 150
    assert (img.width(), img.height()) == (600, 450)          # exactly 4 × 3 in at 150 dpi
    assert files[2].read_bytes()[:5] == b"%PDF-"
    mask = os.umask(0)
    os.umask(mask)
    assert all(stat.S_IMODE(f.stat().st_mode) == 0o666 & ~mask for f in files)
    one = save_figure(fig, tmp_path / "one.svg", FigureOptions())
    assert [f.name for f in one] == ["one.svg"]
    with pytest.raises(InputError, match="use .png, .svg or .pdf"):
        save_figure(fig, tmp_path / "x.bmp", FigureOptions())


def test_open_loads_the_workspace_model_then_selects(qtbot, window, tmp_path, make_checkpoint):
    other = make_checkpoint(tmp_path / "other", seed=1)
    path = tmp_path / "o.elmows.json"
    wf.save_workspace(path, wf.WorkspaceData(
        sentences=["A bank of fog rolled in."], selection={"sentence": 0, "token": 1, "word": "bank"},
        checkpoint=wf.CheckpointRef(str(other), wf.checkpoint_checksum(other), "other")))
    with qtbot.waitSignal(window.actions_.restored, timeout=60000):
        window.actions_.open_workspace(path)
    ws = window.workspace
    assert ws.model_spec.path == str(other) and ws.model_info.checksum == wf.checkpoint_checksum(other)
    assert ws.all_embedded() and ws.selection == TokenRef(0, 1) and window.errors == []


def test_dialogs_return_their_choices(qtbot, window):
    from elmo_explorer.common.figure_export import ReportDialog, VectorDialog
    from elmo_engine.errors import InputError

    rd = ReportDialog(FigureOptions(), window)
    qtbot.addWidget(rd)
    assert not rd.height_in.isEnabled()
    rd.keep.setChecked(False)
    rd.width_in.setValue(3.5)
    rd.height_in.setValue(2.5)
    rd.dpi.setValue(600)
    rd.pdf.setChecked(True)
    assert rd.height_in.isEnabled()
    assert rd.options() == FigureOptions(3.5, 2.5, 600, False, ("png", "svg", "pdf"))
    window.workspace.select(TokenRef(0, 4))
    vd = VectorDialog(window.workspace, [0.2, 0.3, 0.5], window)
    qtbot.addWidget(vd)
    assert [vd.scope.itemData(i) for i in range(vd.scope.count())] == ["all", "word", "token"]
    assert "'bank' (2)" in vd.scope.itemText(1) and vd.weights.text() == "0.2, 0.3, 0.5"
    vd.layers.setCurrentIndex(vd.layers.findData("mix"))
    vd.fmt.setCurrentIndex(vd.fmt.findData("tsv"))
    vd.scope.setCurrentIndex(1)
    assert vd.options() == {"fmt": "tsv", "layers": "mix", "weights": [0.2, 0.3, 0.5],
                            "gamma": 1.0, "scope": "word"}
    vd.weights.setText("0.2 0.3;0.5")                 # spaces and semicolons, as --mix-weights
    assert vd.options()["weights"] == [0.2, 0.3, 0.5]
    vd.weights.setText("1, 2")
    with pytest.raises(InputError, match="give 3 non-negative mix weights"):
        vd.options()
    vd.accept()                                               # refused: the problem is shown
    assert vd.result() == 0 and "give 3" in vd.problem.text()


class FakeRun:
    def __init__(self, task):
        self.task = task

    def to_dict(self):
        return {"task": self.task, "weights": [0.4, 0.4, 0.2]}


Save, Discard, Cancel = (QMessageBox.StandardButton.Save, QMessageBox.StandardButton.Discard,
                         QMessageBox.StandardButton.Cancel)


def _answer(monkeypatch, button, asked):
    def question(parent, title, text, *args, **kw):
        asked.append(text)
        return button
    monkeypatch.setattr(QMessageBox, "question", question)


def test_quitting_with_unsaved_probe_runs_asks_and_cancel_keeps_the_window(qtbot, window,
                                                                          monkeypatch):
    actions, asked = window.actions_, []
    actions.prompt_on_close = True
    window.panels["fake"].runs = [FakeRun("pos")]
    _answer(monkeypatch, Cancel, asked)
    assert not window.close() and window.isVisible()
    assert len(asked) == 1 and "holds 1 probe run that was never saved" in asked[0]
    assert actions.timer.isActive()                          # autosave goes on
    _answer(monkeypatch, Discard, asked)
    assert window.close() and not window.isVisible() and len(asked) == 2


def test_save_on_quit_asks_for_a_file_and_writes_it(qtbot, window, tmp_path, monkeypatch):
    actions, asked = window.actions_, []
    actions.prompt_on_close = True
    window.panels["fake"].runs = [FakeRun("wsd")]
    _answer(monkeypatch, Save, asked)
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: ("", ""))
    assert not window.close() and window.isVisible()         # no file chosen: stay
    target = tmp_path / "quit"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(target), ""))
    assert window.close()
    saved = tmp_path / ("quit" + wf.SUFFIX)
    obj = json.loads(saved.read_text(encoding="utf-8"))
    assert obj["probe_runs"] == [{"task": "wsd", "weights": [0.4, 0.4, 0.2]}]
    assert obj["sentences"] == TEXT.strip().split("\n") and actions.path == saved


def test_a_changed_saved_workspace_is_saved_in_place_on_quit(qtbot, window, tmp_path,
                                                             monkeypatch):
    actions, asked = window.actions_, []
    actions.prompt_on_close = True
    path = tmp_path / "w.elmows.json"
    with qtbot.waitSignal(actions.saved, timeout=10000):
        actions.save_workspace(path)
    window.workspace.select(TokenRef(1, 6))
    monkeypatch.setattr(wa.wf, "save_workspace", _raise_disk_full)
    _answer(monkeypatch, Save, asked)
    assert not window.close() and window.isVisible()         # a failed save keeps the window
    assert window.errors and "No space left" in window.errors[-1][1]
    assert "w.elmows.json" in asked[0]
    monkeypatch.undo()
    _answer(monkeypatch, Save, asked)
    assert window.close()
    assert json.loads(path.read_text(encoding="utf-8"))["selection"]["word"] == "bank"


def test_a_save_on_quit_that_fails_unexpectedly_keeps_the_window(qtbot, window, monkeypatch):
    """An encodings attack pass: Save on quit raised a UnicodeEncodeError (a name that is not
    UTF-8), which only ElmoError/OSError were caught for: the window closed, nothing saved."""
    actions, asked = window.actions_, []
    actions.prompt_on_close = True
    window.panels["fake"].runs = [FakeRun("pos")]

    def unexpected(path, data):
        raise UnicodeEncodeError("utf-8", "ck\udcff", 2, 3, "surrogates not allowed")

    monkeypatch.setattr(wa.wf, "save_workspace", unexpected)
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: ("w.elmows.json", ""))
    _answer(monkeypatch, Save, asked)
    assert not window.close() and window.isVisible()
    assert window.errors and "UnicodeEncodeError" in window.errors[-1][1]


def _raise_disk_full(path, data):
    raise OSError(errno.ENOSPC, "No space left on device", str(path))


def test_unsaved_sentences_alone_do_not_ask(qtbot, window, monkeypatch):
    window.actions_.prompt_on_close = True
    window.sentences.set_text("Only new sentences.\n")
    qtbot.waitUntil(window.workspace.all_embedded, timeout=10000)
    assert window.actions_.is_dirty()
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: pytest.fail("asked"))
    assert window.close()


def test_bf16_menu_entry_follows_the_cpus_bf16_units(qtbot, monkeypatch):
    import dataclasses

    from PySide6.QtWidgets import QMenu, QWidget

    from elmo_engine import runtime
    from elmo_explorer.shell import menus

    monkeypatch.setattr(menus, "cuda_name", lambda: "")          # no GPU
    entries = {}
    for units in ("AVX512_BF16", None):
        cpu = dataclasses.replace(runtime.cpu_bf16(), units=units)
        monkeypatch.setattr(menus, "cpu_bf16", lambda c=cpu: c)
        window = QWidget()                     # what the menu builder reads of the window
        qtbot.addWidget(window)
        window.settings = type("Settings", (), {"precision": "fp32"})()
        window.set_run_option = lambda key, value: None
        menu = QMenu(window)
        menus._build_choice_menu(window, menu, "precision", [("fp32", "fp32"), ("bf16", "bf16")])
        assert all(a.isEnabled() for a in menu.actions())    # not asked before the menu opens
        menu.aboutToShow.emit()                              # the user opens the menu
        entries[units] = {a.data(): a for a in menu.actions()}
    assert entries["AVX512_BF16"]["bf16"].isEnabled()
    assert "AVX512_BF16" in entries["AVX512_BF16"]["bf16"].toolTip()
    assert not entries[None]["bf16"].isEnabled()
    assert "bf16 units" in entries[None]["bf16"].toolTip()
    assert entries[None]["fp32"].isEnabled()


def test_settings_tokenization_splits_on_spaces_and_goes_with_the_workspace(
        qtbot, window, tmp_path, app_settings_dir):
    """Settings ▸ Tokenization ▸ Pretokenized: the lines are tokenized (split on spaces, as
    ``--pretokenized``) and embedded again, the vectors are the engine's for those tokens,
    the choice is remembered for the next session and saved with the workspace; opening a
    workspace sets its own tokenization without changing the remembered one."""
    from elmo_engine.analysis.report import tokenize_sentences

    ws, actions = window.workspace, window.actions_
    window.sentences.set_text("The well @-@ known bank rose .\n")
    qtbot.waitUntil(lambda: ws.all_embedded() and ws.tokens[0][:3] == ["The", "well", "@"],
                    timeout=60000)
    menu = {a.data(): a for a in window.tokenization_menu.actions()}
    assert menu["tokenize"].isChecked() and not menu["whitespace"].isChecked()
    ws.select(TokenRef(0, 5))                                     # "known", 4th when split
    assert ws.word_at(TokenRef(0, 5)) == "known"
    menu["whitespace"].trigger()                                  # as the user chooses it
    qtbot.waitUntil(lambda: ws.all_embedded() and ws.tokens[0][:3] == ["The", "well", "@-@"],
                    timeout=60000)
    assert menu["whitespace"].isChecked() and ws.tokenization == "whitespace"
    assert ws.selection == TokenRef(0, 3)          # the same word, selected in its new place
    want = ws.embedder.embed([["The", "well", "@-@", "known", "bank", "rose", "."]])[0]
    np.testing.assert_allclose(ws.activations[0], want, atol=1e-5)
    assert AppSettings(app_settings_dir).tokenization == "whitespace"   # remembered
    path = tmp_path / "w.elmows.json"
    with qtbot.waitSignal(actions.saved, timeout=10000):
        actions.save_workspace(path)
    saved = wf.load_workspace(path).data
    assert saved.tokenization == "whitespace"
    assert tokenize_sentences(saved.sentences, saved.tokenization) == ws.tokens
    menu["tokenize"].trigger()                                    # back to typed text
    qtbot.waitUntil(lambda: ws.all_embedded() and ws.tokens[0][2] == "@", timeout=60000)
    with qtbot.waitSignal(actions.restored, timeout=60000):
        actions.open_workspace(path)                              # its own: pretokenized
    qtbot.waitUntil(lambda: ws.all_embedded() and ws.tokens[0][2] == "@-@", timeout=60000)
    assert menu["whitespace"].isChecked()
    assert AppSettings(app_settings_dir).tokenization == "tokenize"     # the setting kept
    assert window.errors == []
