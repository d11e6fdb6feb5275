"""Entry point (--screenshot), settings persistence, exports, dialogs, logging."""
from __future__ import annotations

import logging

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtGui import QImage

import elmo_explorer.shell.dialogs
from elmo_explorer.shell.main import main
from elmo_explorer.shell.main_window import MainWindow
from elmo_explorer.state.settings import AppSettings

pytestmark = [pytest.mark.gui, pytest.mark.usefixtures("torch_one_thread")]


@pytest.fixture
def no_other_views(monkeypatch):
    """Only the app's own sentences view: the analysis views have their own tests."""
    import elmo_explorer.shell.views

    monkeypatch.setattr(elmo_explorer.shell.views, "VIEWS", ())


def test_screenshot_writes_a_png(qtbot, tmp_path, tiny_checkpoint, no_other_views):
    out = tmp_path / "shots" / "window.png"
    code = main(["--screenshot", str(out), "--checkpoint", str(tiny_checkpoint), "--view",
                 "sentences", "--size", "900x600", "--settings-dir", str(tmp_path / "s")])
    assert code == 0
    image = QImage(str(out))
    assert (image.width(), image.height()) == (900, 600)
    assert out.stat().st_size > 10_000
    # not a blank picture: many distinct colours
    colours = {image.pixel(x, y) for x in range(0, 900, 7) for y in range(0, 600, 7)}
    assert len(colours) > 20
    log_text = (tmp_path / "s" / "data" / "logs" / "elmo-explorer.log").read_text()
    assert "starting; log file" in log_text
    assert not list(out.parent.glob("*.part"))


def test_screenshot_waits_for_every_job_the_view_started(qtbot, tmp_path, tiny_checkpoint,
                                                         no_other_views, monkeypatch):
    """A view that starts work once the sentences are embedded (as the probes' first demo run
    does) is pictured only after that work is done, not while it still runs."""
    import time

    import elmo_explorer.shell.screenshot
    from elmo_explorer.shell.main_window import MainWindow as Window

    events = {}
    start = Window.start

    def start_and_work(self, *a, **k):
        ws = self.workspace

        def after_embedding():
            if ws.all_embedded() and "submitted" not in events:
                events["submitted"] = True

                def job(state):
                    time.sleep(1.5)
                    events["job_done"] = time.monotonic()

                ws.worker.submit("a view's own job", job)

        ws.activations_changed.connect(after_embedding)
        return start(self, *a, **k)

    write = elmo_explorer.shell.screenshot.atomic_write_bytes

    def recording_write(path, data):
        events["shot"] = time.monotonic()
        write(path, data)

    monkeypatch.setattr(Window, "start", start_and_work)
    monkeypatch.setattr(elmo_explorer.shell.screenshot, "atomic_write_bytes", recording_write)
    out = tmp_path / "w.png"
    assert main(["--screenshot", str(out), "--checkpoint", str(tiny_checkpoint), "--view",
                 "sentences", "--settings-dir", str(tmp_path / "s"), "--timeout", "120"]) == 0
    assert out.is_file() and events.get("submitted")
    assert "job_done" in events and events["shot"] > events["job_done"]


def test_no_display_is_one_line_and_exit_2(monkeypatch, capsys):
    """Without a display (and no other Qt platform asked for) the app says how to run headless
    and exits 2 before Qt starts, instead of Qt's abort (exit 134) and its xcb messages."""
    from elmo_explorer.shell import startup

    assert startup.display_problem({}, "linux") == "DISPLAY is not set"
    assert startup.display_problem({"QT_QPA_PLATFORM": "offscreen"}, "linux") is None
    assert startup.display_problem({"WAYLAND_DISPLAY": "wayland-0"}, "linux") is None
    assert startup.display_problem({"QT_QPA_PLATFORM": "xcb"}, "linux") == "DISPLAY is not set"
    assert "no X server answers at DISPLAY=:987" in startup.display_problem(
        {"DISPLAY": ":987"}, "linux")
    assert startup.display_problem({}, "darwin") is None
    import elmo_explorer.shell.main as app_main

    monkeypatch.setattr(app_main, "QApplicationInstance", lambda: None)
    monkeypatch.setattr(startup, "display_problem", lambda: "DISPLAY is not set")
    assert app_main.main(["--screenshot", "x.png"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "QT_QPA_PLATFORM=offscreen" in err[0] and "--screenshot" in err[0]


def test_screenshot_of_a_bad_checkpoint_fails(qtbot, tmp_path, no_other_views, capsys):
    out = tmp_path / "never.png"
    code = main(["--screenshot", str(out), "--checkpoint", str(tmp_path / "missing"),
                 "--settings-dir", str(tmp_path / "s"), "--timeout", "60"])
    assert code == 1 and not out.exists()
    assert "no such file or directory" in capsys.readouterr().err


def test_screenshot_without_any_model_fails_clearly(qtbot, tmp_path, no_other_views, capsys,
                                                   monkeypatch):
    import elmo_explorer.shell.main_window

    monkeypatch.setattr(elmo_explorer.shell.main_window, "demo_checkpoint", lambda: None)
    out = tmp_path / "never.png"
    assert main(["--screenshot", str(out), "--settings-dir", str(tmp_path / "s")]) == 1
    assert "no model to load" in capsys.readouterr().err and not out.exists()


def test_unknown_view_and_bad_size(qtbot, tmp_path, no_other_views, capsys):
    assert main(["--view", "projection", "--settings-dir", str(tmp_path)]) == 1
    assert "no view 'projection'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--size", "big"])


def test_settings_persist_between_windows(qtbot, app_settings_dir, tiny_checkpoint, monkeypatch):
    monkeypatch.setattr(elmo_explorer.shell.dialogs, "show_error", lambda *a: pytest.fail(f"error dialog: {a}"))
    s1 = AppSettings()
    assert s1.folder == app_settings_dir and s1.first_launch
    w = MainWindow(s1, views=())
    qtbot.addWidget(w)
    w.show()
    w.start(str(tiny_checkpoint), "first sentence\nsecond one")
    qtbot.waitUntil(w.workspace.all_embedded, timeout=60000)
    w.set_run_option("device", "cpu")
    qtbot.waitUntil(lambda: not w.workspace.worker.is_busy(), timeout=60000)
    w.resize(760, 540)
    w.close()

    s2 = AppSettings(app_settings_dir)                      # a fresh QSettings on the same file
    assert not s2.first_launch
    assert s2.device == "cpu" and s2.precision == "fp32"
    assert s2.last_checkpoint == str(tiny_checkpoint)
    assert s2.recent_checkpoints() == [str(tiny_checkpoint)]
    assert not s2.geometry().isEmpty() and not s2.window_state().isEmpty()
    w2 = MainWindow(s2, views=())
    qtbot.addWidget(w2)
    w2.show()
    w2.start()                                               # last checkpoint + last sentences
    qtbot.waitUntil(w2.workspace.all_embedded, timeout=60000)
    assert w2.workspace.sentences == ["first sentence", "second one"]
    assert w2.workspace.model_spec.path == str(tiny_checkpoint)
    assert (w2.width(), w2.height()) == (760, 540)
    w2.close()


def test_recent_list_is_typed_and_bounded(app_settings_dir):
    s = AppSettings()
    for i in range(12):
        s.add_recent_checkpoint(f"/models/m{i}")
    s.add_recent_checkpoint("/models/m5")
    s.sync()
    again = AppSettings().recent_checkpoints()
    assert again[0] == "/models/m5" and len(again) == 8 and len(set(again)) == 8
    with pytest.raises(ValueError):
        s.device = "tpu"


def test_model_info_dialog_lists_parts(qtbot, tiny_checkpoint):
    from elmo_engine.model.checkpoint import load_checkpoint

    info = load_checkpoint(tiny_checkpoint).info
    dialog = elmo_explorer.shell.dialogs.ModelInfoDialog(info, "CPU", "fp32")
    qtbot.addWidget(dialog)
    text = dialog.browser.toPlainText()
    assert info.checksum in text and "CPU" in text and "fp32" in text
    for part in ("char embedding", "convolutions", "highway", "lstm", "total"):
        assert part in text
    assert f"{info.parameter_counts['total']:,}" in text
    assert elmo_explorer.shell.dialogs.human_bytes(1536) == "1.5 KB"
    assert elmo_explorer.shell.dialogs.human_count(93_600_000) == "93.6 M"


def test_job_errors_are_logged_with_traceback(qtbot, tmp_path):
    from elmo_explorer.shell.logging_setup import close_logging, setup_logging
    from elmo_explorer.state.worker import Worker

    path = setup_logging(tmp_path / "logs")
    w = Worker()
    try:
        def fail(state):
            raise ZeroDivisionError("deliberate")

        with qtbot.waitSignal(w.unhandled_error, timeout=5000):
            w.submit("divide", fail)
    finally:
        w.shutdown()
        close_logging()
    text = path.read_text()
    assert "job 'divide' failed" in text and "Traceback" in text and "ZeroDivisionError" in text
    assert not any(type(h).__name__ == "_AppHandler" for h in logging.getLogger().handlers)


def test_an_unknown_view_is_named():
    from elmo_explorer.shell.views import PANELS, VIEWS, panel_classes

    with pytest.raises(KeyError, match="no_such_view"):
        panel_classes(["no_such_view"])
    assert [v for v, _ in panel_classes()] == list(VIEWS) and set(VIEWS) == set(PANELS)
    assert panel_classes(["layers"]) == [("layers", PANELS["layers"])]


def test_groups_come_back_at_the_next_launch(qtbot, app_settings_dir, tiny_checkpoint,
                                             monkeypatch):
    """First launch: the demo sentences with their groups; edit one group's sentences away and
    close; the next launch shows the edited sentences with the remaining sentences' groups."""
    from elmo_engine.resources import demo_sentences_path

    monkeypatch.setattr(elmo_explorer.shell.dialogs, "show_error", lambda *a: pytest.fail(f"error dialog: {a}"))
    w = MainWindow(AppSettings(), views=())
    qtbot.addWidget(w)
    w.show()
    w.start(str(tiny_checkpoint))                              # first launch: demo sentences
    qtbot.waitUntil(w.workspace.all_embedded, timeout=60000)
    first = dict(w.workspace.sentence_groups)
    pairs = [line.split("\t", 1) for line in
             demo_sentences_path().read_text("utf-8").splitlines() if "\t" in line]
    assert first == {s: g for g, s in pairs if g} and len(set(first.values())) >= 4
    kept = [s for s in w.workspace.sentences if first.get(s, "").startswith("bank")]
    assert len(kept) >= 4
    w.sentences.set_text("\n".join(kept + ["An ungrouped sentence about a bank."]))
    qtbot.waitUntil(w.workspace.all_embedded, timeout=60000)
    w.close()

    w2 = MainWindow(AppSettings(app_settings_dir), views=())
    qtbot.addWidget(w2)
    w2.show()
    w2.start()                                                 # the last session
    qtbot.waitUntil(w2.workspace.all_embedded, timeout=60000)
    assert w2.workspace.sentences == kept + ["An ungrouped sentence about a bank."]
    assert w2.workspace.sentence_groups == {s: first[s] for s in kept}
    w2.close()
    # a damaged groups file costs the groups, not the sentences
    groups_file = AppSettings(app_settings_dir).session_sentences_path().with_suffix(".groups.json")
    groups_file.write_text("{not json", encoding="utf-8")
    w3 = MainWindow(AppSettings(app_settings_dir), views=())
    qtbot.addWidget(w3)
    w3.start()
    assert w3.workspace.sentences == kept + ["An ungrouped sentence about a bank."]
    assert w3.workspace.sentence_groups == {}
    w3.close()
    # a settings attack pass: a groups file nested 10,000 deep stopped the start, one that is a
    # FIFO hung it; an emptied settings file showed the demo and wrote it over the sentences
    import os

    session = AppSettings(app_settings_dir).session_sentences_path()
    for damage in ("deep", "fifo", "settings emptied"):
        groups_file.unlink(missing_ok=True)
        if damage == "deep":
            groups_file.write_text("[" * 10000 + "]" * 10000, encoding="utf-8")
        elif damage == "fifo":
            os.mkfifo(groups_file)
        else:
            settings = AppSettings(app_settings_dir)
            settings.settings_file().write_text("", encoding="utf-8")
        w4 = MainWindow(AppSettings(app_settings_dir), views=())
        qtbot.addWidget(w4)
        w4.start()
        assert w4.workspace.sentences == kept + ["An ungrouped sentence about a bank."], damage
        w4.close()
    # sentences that cannot be read back are kept aside, never written over by the quit
    session.write_bytes(b"caf\xe9\n")
    w5 = MainWindow(AppSettings(app_settings_dir), views=())
    qtbot.addWidget(w5)
    w5.start()
    aside = [p for p in session.parent.iterdir() if ".unreadable-" in p.name]
    assert len(aside) == 1 and (aside[0] / session.name).read_bytes() == b"caf\xe9\n"
    assert "sentences could not be read" in w5._start_notice and "kept in" in w5._start_notice
    w5.close()
    assert (aside[0] / session.name).read_bytes() == b"caf\xe9\n" and session.is_file()


def test_the_window_fits_a_1280_by_800_screen(qtbot, app_settings_dir):
    """With every view, and with a long corpus file name in the Layers view, the window's
    minimum size fits a 1280 × 800 laptop screen (the Layers controls once made it 1,336 px)."""
    w = MainWindow(AppSettings(app_settings_dir))
    qtbot.addWidget(w)
    assert {"contexts", "projection", "probes", "layers"} <= set(w.panels)
    w.panels["layers"].set_corpus("/data/" + "a_very_long_corpus_file_name_" * 6 + ".txt")
    w.show()
    hint = w.minimumSizeHint()
    assert hint.width() <= 1280 and hint.height() <= 800, hint
    label = w.panels["layers"].view.corpus_label.text()
    assert "…" in label and label.startswith("corpus: a_very")
    w.close()
    # timers the views started (the projection's UMAP warm-up) fire after the window closed:
    # they must not submit to the stopped worker (that raised inside Qt and crashed the process)
    qtbot.wait(100)
