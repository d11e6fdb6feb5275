"""The main window: loading, errors, editing, token table, settings, responsiveness, cancel."""
from __future__ import annotations

import time

import numpy as np
import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import QElapsedTimer, Qt, QTimer
from PySide6.QtGui import QTextCursor

import elmo_explorer.shell.dialogs
from elmo_engine.resources import demo_sentences_path
from elmo_explorer.shell.main_window import MainWindow
from elmo_explorer.state.settings import AppSettings
from elmo_explorer.state.workspace import TokenRef

pytestmark = [pytest.mark.gui, pytest.mark.usefixtures("torch_one_thread")]

TEXT = "He sat on the bank of the river.\n\nShe deposited the check at the bank.\nplay\n"


@pytest.fixture
def errors(monkeypatch):
    """Capture error dialogs instead of showing them."""
    shown = []
    monkeypatch.setattr(elmo_explorer.shell.dialogs, "show_error",
                        lambda parent, title, msg: shown.append((title, msg)))
    return shown


def collect_old_windows() -> None:
    """Destroy what earlier tests left (closed windows in reference cycles) before timing.

    Otherwise the garbage collector may tear down an old window, with its 2,000-line editor,
    in the middle of a measurement.
    """
    import gc

    from PySide6.QtCore import QCoreApplication, QEvent

    gc.collect()
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)


def make_window(qtbot, settings_dir, checkpoint=None, text=TEXT):
    w = MainWindow(AppSettings(settings_dir), views=())
    qtbot.addWidget(w)
    w.show()
    w.start(str(checkpoint) if checkpoint else None, text)
    if checkpoint is not None:
        qtbot.waitUntil(w.workspace.all_embedded, timeout=60000)
    return w


@pytest.fixture
def window(qtbot, app_settings_dir, tiny_checkpoint, errors):
    w = make_window(qtbot, app_settings_dir, tiny_checkpoint)
    yield w
    w.workspace.worker.shutdown()


def test_window_shows_model_status_and_tokens(window, tiny_checkpoint):
    ws = window.workspace
    assert ws.sentences == ["He sat on the bank of the river.", "She deposited the check at the bank.",
                            "play"]
    total = ws.model_info.parameter_counts["total"]
    assert window.status.model_label.text().startswith(f"{tiny_checkpoint.name} · ")
    assert "params" in window.status.model_label.text() and total > 1000
    assert window.status.device_label.text() == "CPU · fp32"
    table = window.sentences.model
    assert table.rowCount() == 9 and table.columnCount() == 2 + 3
    assert table.data(table.index(4, 0)) == "bank"
    assert table.data(table.index(4, 1)) == "6"                    # 4 bytes + 2 markers
    expected = np.linalg.norm(ws.activations[0][2, 4])
    assert float(table.data(table.index(4, 4))) == pytest.approx(expected, abs=1e-3)
    assert window.sentences.is_ready() and not window.banner.isVisible()
    assert window.statusBar().currentMessage() == f"Loaded {tiny_checkpoint}"


def test_char_id_count_caps_long_tokens():
    from elmo_explorer.views.sentences.table import char_id_count

    assert char_id_count("a") == 3
    assert char_id_count("é") == 4                                  # 2 UTF-8 bytes
    assert char_id_count("x" * 100) == 50
    assert char_id_count("😀" * 20, max_chars=50) == 50              # 80 bytes, capped at 48


def test_clicking_a_token_selects_it(qtbot, window):
    assert window.workspace.selection == TokenRef(0, 4)     # the default: the first "bank"
    table = window.sentences.table
    rect = table.visualRect(window.sentences.model.index(6, 0))
    with qtbot.waitSignal(window.workspace.selection_changed, timeout=2000) as blocker:
        qtbot.mouseClick(table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert blocker.args == [TokenRef(0, 6)]
    assert window.workspace.word_at(window.workspace.selection) == "the"
    # a selection made elsewhere shows that sentence and moves the editor cursor to its line
    window.workspace.select(TokenRef(1, 6))
    assert window.sentences.model.data(window.sentences.model.index(6, 0)) == "bank"
    assert window.sentences.editor.textCursor().blockNumber() == 2
    assert table.currentIndex().row() == 6


def test_editing_one_line_reembeds_only_that_line(qtbot, window):
    ws = window.workspace
    misses = ws.embedder.stats["sentence_misses"]
    cursor = QTextCursor(window.sentences.editor.document().findBlockByNumber(3))
    cursor.movePosition(QTextCursor.MoveOperation.EndOfBlock)
    cursor.insertText(" the piano")
    assert window.sentences.pending_edit()                          # waits for the typing pause
    with qtbot.waitSignal(ws.sentences_changed, timeout=3000):
        pass
    qtbot.waitUntil(ws.all_embedded, timeout=10000)
    assert ws.sentences[2] == "play the piano"
    assert ws.embedder.stats["sentence_misses"] - misses == 1


def test_bad_checkpoint_shows_error_and_keeps_model(qtbot, window, errors, tmp_path):
    ws = window.workspace
    checksum = ws.model_info.checksum
    (tmp_path / "options.json").write_text('{"lstm": {"dim": 4}}')
    with qtbot.waitSignal(ws.model_load_failed, timeout=10000):
        window.open_checkpoint(tmp_path / "options.json")
    assert len(errors) == 1
    title, message = errors[0]
    assert title == "Cannot load checkpoint"
    assert "options.json" in message and "stays active" in message
    assert ws.model_info.checksum == checksum and ws.all_embedded()
    assert window.status.model_label.text().startswith(ws.model_info.name)


def test_missing_demo_model_shows_banner(qtbot, app_settings_dir, errors, monkeypatch):
    import elmo_explorer.shell.main_window as mw

    monkeypatch.setattr(mw, "demo_checkpoint", lambda: None)
    w = make_window(qtbot, app_settings_dir, None)
    assert w.banner.isVisible() and "Open checkpoint" in w.banner.text()
    w.open_demo_model()
    assert errors and errors[0][0] == "No demo model"
    qtbot.waitUntil(lambda: not w.workspace.worker.is_busy(), timeout=5000)
    assert w.workspace.tokens[0][:3] == ["He", "sat", "on"]          # tokens without a model
    w.workspace.worker.shutdown()


def test_gui_stays_responsive_while_embedding(qtbot, window):
    """A 20 ms timer on the GUI thread keeps ticking (gaps < 100 ms) during long embedding jobs.

    Rounds of 2,000 new sentences are embedded until the jobs took at least a second in all, so
    the measurement does not depend on how fast the engine is.
    """
    ws = window.workspace
    collect_old_windows()
    gaps, clock = [], QElapsedTimer()
    timer = QTimer()
    timer.setInterval(20)

    def tick():
        gaps.append(clock.restart())

    timer.timeout.connect(tick)
    elapsed, rounds = 0.0, 0
    while elapsed < 1.0 and rounds < 6:
        lines = [f"round {rounds} sentence {i} : the bank of river number {i} and a play about it"
                 for i in range(2000)]
        window.sentences.set_text("\n".join(lines))
        # time the embedding: putting 2,000 lines into the editor (and laying them out) and
        # showing their tokens is GUI work by nature; the job embeds after tokenizing
        qtbot.waitUntil(lambda: len(ws.sentences) == 2000 and all(ws.tokens)
                        and ws.sentences[0].startswith(f"round {rounds} "), timeout=10000)
        clock.start()
        timer.start()
        started = time.perf_counter()
        qtbot.waitUntil(lambda: len(ws.sentences) == 2000 and ws.all_embedded()
                        and ws.sentences[0].startswith(f"round {rounds} "), timeout=60000)
        elapsed += time.perf_counter() - started
        timer.stop()
        rounds += 1
    print(f"{rounds} x 2000 sentences in {elapsed:.2f} s; worst timer gaps (ms): {sorted(gaps)[-5:]}")
    assert len(ws.activations) == 2000 and all(a.shape[1] == 16 for a in ws.activations)
    assert len(gaps) >= 20, f"the jobs were too short to measure ({elapsed:.2f} s)"
    assert max(gaps) < 100, f"GUI thread blocked for {max(gaps)} ms ({elapsed:.2f} s of jobs)"


def test_escape_cancels_a_long_job_within_a_second(qtbot, window):
    ws = window.workspace
    window.sentences.set_text("\n".join(f"line {i} of a long job about banks" for i in range(3000)))
    qtbot.waitUntil(lambda: len(ws.sentences) == 3000, timeout=5000)
    qtbot.waitUntil(lambda: ws.worker.current_job() is not None, timeout=5000)
    with qtbot.waitSignal(ws.worker.idle, timeout=1000):
        qtbot.keyClick(window, Qt.Key.Key_Escape)
    assert not ws.all_embedded()
    # the next edit schedules the missing lines again
    window.sentences.commit()
    ws.set_sentences(ws.sentences[:5])
    qtbot.waitUntil(ws.all_embedded, timeout=10000)


def test_open_and_save_sentences(qtbot, window, tmp_path, errors):
    src = tmp_path / "in.txt"
    src.write_text("first line 😀\n\n  \ncafe\u0301 שלום\n", encoding="utf-8")
    with qtbot.waitSignal(window.workspace.sentences_changed, timeout=5000):
        window.open_sentences(src)
    assert window.workspace.sentences == ["first line 😀", "café שלום"]
    qtbot.waitUntil(window.workspace.all_embedded, timeout=10000)
    out = tmp_path / "out" / "saved.txt"
    with qtbot.waitSignal(window.workspace.worker.idle, timeout=5000):
        window.save_sentences(out)
    assert out.read_text(encoding="utf-8") == "first line 😀\ncafé שלום\n"
    bad = tmp_path / "binary.txt"
    bad.write_bytes(b"abc\x00def\n")
    with qtbot.waitSignal(window.workspace.worker.idle, timeout=5000):
        window.open_sentences(bad)
    assert errors and errors[-1][0] == "Cannot open sentences" and "binary.txt" in errors[-1][1]


def test_big_file_does_not_block_the_gui(qtbot, app_settings_dir, errors, tmp_path):
    """A 2 MB file: read and tokenized on the worker (no model here: tokens only)."""
    src = tmp_path / "big.txt"
    line = "She deposited the check at the bank before she went to play the violin ."
    src.write_text("\n".join(f"{line} {i}" for i in range(2_000_000 // len(line))), encoding="utf-8")
    assert src.stat().st_size > 2_000_000

    collect_old_windows()
    w = MainWindow(AppSettings(app_settings_dir), views=())
    qtbot.addWidget(w)
    w.show()
    gaps, clock = [], QElapsedTimer()
    timer = QTimer()
    timer.setInterval(20)
    timer.timeout.connect(lambda: gaps.append(clock.restart()))
    clock.start()
    timer.start()
    w.open_sentences(src)
    qtbot.waitUntil(lambda: len(w.workspace.sentences) > 20000 and not w.workspace.worker.is_busy()
                    and all(w.workspace.tokens) and not w.sentences.is_filling(), timeout=60000)
    timer.stop()
    n = len(w.workspace.sentences)
    assert w.workspace.tokens[-1][-1] == str(n - 1)
    assert w.sentences.editor.blockCount() == n
    gaps.sort()
    print("worst gaps (ms):", gaps[-5:])
    # the window keeps repainting and taking input throughout: most gaps stay near the 20 ms
    # timer; a few GUI-side steps (the 27,000-line list, editor layout) cost 0.1-0.5 s on a
    # loaded 2-core machine. Before the text went into the editor in pieces it froze for > 1 s.
    assert gaps[int(len(gaps) * 0.9)] < 150, f"GUI sluggish: gaps {gaps[-8:]} ms"
    assert gaps[-1] < 900, f"GUI blocked: worst gaps {gaps[-3:]} ms"
    assert demo_sentences_path().is_file()
    w.workspace.worker.shutdown()


def test_export_token_table_csv(qtbot, window, tmp_path):
    out = tmp_path / "tokens.csv"
    with qtbot.waitSignal(window.workspace.worker.idle, timeout=5000):
        window.sentences.export_csv(out)
    rows = out.read_text(encoding="utf-8").splitlines()
    assert rows[0] == "sentence,token_index,token,char_ids,norm_L0,norm_L1,norm_L2"
    assert len(rows) == 1 + 9 + 8 + 1
    first = rows[5].split(",")
    assert first[:4] == ["1", "5", "bank", "6"]
    assert float(first[6]) == pytest.approx(np.linalg.norm(window.workspace.activations[0][2, 4]), rel=1e-5)
    window._fill_export()
    assert "Token table (CSV)…" in [a.text() for a in window.export_menu.actions()]


def test_closing_while_a_job_runs_stops_it(qtbot, window):
    ws = window.workspace
    window.sentences.set_text("\n".join(f"closing line {i} about a river bank" for i in range(3000)))
    qtbot.waitUntil(lambda: ws.worker.current_job() is not None and len(ws.sentences) == 3000,
                    timeout=5000)
    started = time.perf_counter()
    window.close()
    assert time.perf_counter() - started < 2.0
    assert ws.worker.is_stopped() and not ws.worker.threads_running()
    assert not window.isVisible()


def test_a_5000_token_line_keeps_the_gui_live(qtbot, window):
    ws = window.workspace
    gaps, clock = [], QElapsedTimer()
    timer = QTimer()
    timer.setInterval(20)
    timer.timeout.connect(lambda: gaps.append(clock.restart()))
    collect_old_windows()
    words = ["bank", "river", "😀", "שלום", "cafe\u0301", "play"]
    line = " ".join(words[i % len(words)] for i in range(5000))
    clock.start()
    timer.start()
    window.sentences.set_text(line + "\nshort line")
    qtbot.waitUntil(lambda: len(ws.sentences) == 2 and ws.all_embedded(), timeout=60000)
    timer.stop()
    assert ws.activations[0].shape == (3, 5000, 32)
    assert window.sentences.model.rowCount() == 5000
    # one-time: shaping the 30 KB mixed-script line when it is put into the editor (~0.2 s)
    assert max(gaps) < 400, f"GUI blocked for {max(gaps)} ms"
    assert sorted(gaps)[-2] < 150, f"GUI blocked: worst gaps {sorted(gaps)[-3:]} ms"


def test_first_launch_uses_the_demo_model(qtbot, app_settings_dir, tiny_checkpoint, errors,
                                          monkeypatch):
    import elmo_explorer.shell.main_window as mw

    monkeypatch.setattr(mw, "demo_checkpoint", lambda: tiny_checkpoint)
    w = MainWindow(AppSettings(app_settings_dir), views=())
    qtbot.addWidget(w)
    w.show()
    w.start()                                    # no checkpoint, no last one: the demo model
    qtbot.waitUntil(w.workspace.all_embedded, timeout=60000)
    assert w.workspace.model_spec.path == str(tiny_checkpoint)
    assert len(w.workspace.sentences) == 40                      # resources/demo_sentences.tsv
    groups = w.workspace.sentence_groups                         # opened grouped
    assert groups[w.workspace.sentences[0]] == "bank: river"
    assert sum(g.startswith("bank: ") for g in groups.values()) == 10
    assert w.workspace.occurrences("bank") and w.workspace.occurrences("play")
    assert not w.banner.isVisible() and errors == []
    # the status line names the bundled model, not the folder it was installed in
    assert w.statusBar().currentMessage() == "Loaded the bundled demo model"
    w.workspace.worker.shutdown()


def test_every_view_opens_on_the_same_word_and_token(qtbot, app_settings_dir, tiny_checkpoint,
                                                     errors, monkeypatch):
    """Issue 39, part 4: at first launch the workspace selects the first "bank" of the demo
    sentences, and the Contexts, Language model and Projection views open on it (the Corpus
    view queries the selection when its index opens: tests/app/test_corpus_panel.py)."""
    import elmo_explorer.shell.main_window as mw
    import elmo_explorer.views.projection.running as running_mod
    from elmo_explorer.views.projection.sources import reference_word

    monkeypatch.setattr(mw, "demo_checkpoint", lambda: tiny_checkpoint)
    monkeypatch.setattr(running_mod, "AUTO_UMAP_MAX", 0)
    w = MainWindow(AppSettings(app_settings_dir),
                   views=("contexts", "language-model", "projection"))
    qtbot.addWidget(w)
    w.show()
    w.start()
    ws = w.workspace
    qtbot.waitUntil(ws.all_embedded, timeout=60000)
    assert ws.selection == TokenRef(0, 4) and ws.word_at(ws.selection) == "bank"
    lm = w.panels["language-model"].model
    qtbot.waitUntil(lambda: lm.token is not None, timeout=30000)
    assert (lm.sentence, lm.token, lm.tokens[lm.token]) == (0, 4, "bank")
    assert w.panels["contexts"].model.word == "bank"
    assert w.panels["contexts"].model.query == (0, 4)
    assert reference_word(w.panels["projection"].view.controls.word_list(), ws) == "bank"
    ws.worker.shutdown(timeout_s=30)


def test_the_shown_view_computes_first_and_the_hidden_ones_after(qtbot, app_settings_dir,
                                                                  tiny_checkpoint, errors,
                                                                  monkeypatch):
    """At start-up every view starts work on the new model; the hidden views' jobs wait
    (backstage) until the shown view's are done, and a view brought to the front leaves it."""
    import elmo_explorer.shell.main_window as mw

    monkeypatch.setattr(mw, "demo_checkpoint", lambda: tiny_checkpoint)
    w = MainWindow(AppSettings(app_settings_dir),
                   views=("contexts", "characters", "language-model"))
    qtbot.addWidget(w)
    w.show_view("contexts")
    w.show()
    ws = w.workspace
    assert ws.worker.backstage() == {"characters", "language_model"}
    assert ws.worker.front() == {"workspace", "contexts"}
    started = []

    def on_started(job_id, _name):
        handle = ws.worker.job(job_id)
        started.append(handle.group if handle is not None else None)

    ws.worker.job_started.connect(on_started)
    w.start()
    qtbot.waitUntil(lambda: ws.all_embedded() and not ws.worker.is_busy()
                    and all(p.is_ready() for p in w.panels.values()), timeout=120000)
    views = [g for g in started if g in ("contexts", "characters", "language_model")]
    assert {"contexts", "characters", "language_model"} <= set(views)
    last_shown = max(i for i, g in enumerate(views) if g == "contexts")
    first_hidden = min(i for i, g in enumerate(views) if g != "contexts")
    assert last_shown < first_hidden, views
    w.show_view("characters")
    assert ws.worker.backstage() == {"contexts", "language_model"}
    ws.worker.shutdown(timeout_s=30)


def test_the_error_dialog_shows_a_file_name_as_written(qtbot, monkeypatch, caplog):
    """Qt drops a byte that is not UTF-8 (the dialog named another file) and obeys U+202E (the
    name read reversed); the log handler failed on the first. Shown and logged escaped."""
    import logging

    from PySide6.QtWidgets import QMessageBox

    from elmo_explorer.common.error_dialog import show_error

    shown_texts = []
    monkeypatch.setattr(QMessageBox, "exec", lambda box: shown_texts.append(box.text()))
    with caplog.at_level(logging.WARNING):
        show_error(None, "Cannot open sentences",
                   "/data/nope\udcff.txt and evil\u202etxt.exe: cannot open")
    assert shown_texts == ["/data/nope\\xff.txt and evil\\u202etxt.exe: cannot open"]
    assert "nope\\xff.txt" in caplog.text


def test_ctrl_r_runs_the_shown_views_main_action_when_it_is_enabled(qtbot, app_settings_dir,
                                                                      tiny_checkpoint):
    """Only the Layers tab had a key for its main action (a button shortcut); View ▸ Run
    (Ctrl+R) clicks the shown view's (or tab's) main button now, not a disabled one; Enter in
    the Units intervention fields re-measures."""
    from PySide6.QtGui import QKeySequence

    w = MainWindow(AppSettings(app_settings_dir), views=("layers", "units", "projection"))
    qtbot.addWidget(w)
    w.show()
    try:
        w.start(str(tiny_checkpoint), TEXT)
        acts = [a for a in w.menus["view"].actions()
                if a.shortcut() == QKeySequence("Ctrl+R")]
        assert len(acts) == 1 and "main action" in acts[0].text()
        units = w.panels["units"]
        w.show_view("units")
        units.view.tabs.setCurrentIndex(2)                        # Intervene
        asked = []
        units.view.intervene_page.intervene_requested.connect(lambda: asked.append("iv"))
        units.view.intervene_page.iv_button.setEnabled(True)
        w.run_shown_view()
        assert asked == ["iv"]
        units.view.intervene_page.iv_button.setEnabled(False)     # a disabled one: nothing
        w.run_shown_view()
        assert asked == ["iv"]
        units.view.intervene_page.iv_word.returnPressed.emit()  # Enter: not while disabled
        assert asked == ["iv"]
        units.view.intervene_page.iv_button.setEnabled(True)
        units.view.intervene_page.iv_word.returnPressed.emit()
        assert asked == ["iv", "iv"]
        assert units.main_button() is units.view.intervene_page.iv_button
        units.view.tabs.setCurrentIndex(0)
        assert units.main_button() is units.view.ranking_page.rank_button
        assert w.panels["layers"].main_button() is w.panels["layers"].view.run_button
        proj = w.panels["projection"]
        assert proj.main_button() is proj.view.controls.run_button
        proj.tabs.setCurrentWidget(proj.trajectories)
        assert proj.main_button() is proj.trajectories.view.compute
    finally:
        w.workspace.worker.shutdown()


def test_a_views_file_dialogs_start_in_the_folder_last_used(qtbot, app_settings_dir, tmp_path,
                                                            monkeypatch):
    """Every view's open dialog started in the launch folder; they start in the folder last
    used (the window's ``settings.last_dir``, as File ▸ Open does) and remember theirs, and so
    do the export dialogs."""
    from PySide6.QtWidgets import QFileDialog

    from elmo_explorer.common.save_dialog import ask_save_path, existing_folder, open_file_name

    w = MainWindow(AppSettings(app_settings_dir), views=("layers",))
    qtbot.addWidget(w)
    starts = []
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.setattr(QFileDialog, "getOpenFileName", staticmethod(
        lambda parent, title, start, filters: (starts.append(start), (str(tmp_path / "a" /
                                                                          "c.txt"), ""))[1]))
    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(
        lambda parent, title, start, filters: (starts.append(start), (str(tmp_path / "b" /
                                                                          "o.csv"), ""))[1]))
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", staticmethod(
        lambda parent, title, start: (starts.append(start), str(tmp_path))[1]))
    panel = w.panels["layers"]
    w.settings.last_dir = str(tmp_path)
    assert open_file_name(panel, "Corpus", "Text (*.txt)") == str(tmp_path / "a" / "c.txt")
    assert ask_save_path(panel, "Export", "CSV (*.csv)") == tmp_path / "b" / "o.csv"
    assert existing_folder(panel, "Index") == str(tmp_path)
    open_file_name(panel, "Corpus", "Text (*.txt)")
    assert starts == [str(tmp_path), str(tmp_path / "a"), str(tmp_path / "b"), str(tmp_path)]
    assert AppSettings(app_settings_dir).last_dir == str(tmp_path / "a")    # across launches
    w.workspace.worker.shutdown()
