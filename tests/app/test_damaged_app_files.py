"""A settings attack pass (docs/guide/hardening.md, round seven): the files the app keeps
between sessions, damaged. The app starts, says what it ignored, and loses nothing else."""
from __future__ import annotations

import json
import os

import pytest

pytest.importorskip("pytestqt")

from elmo_engine.io import recovery                                           # noqa: E402
from elmo_explorer.shell.main_window import remembered_checkpoint            # noqa: E402
from elmo_explorer.shell.startup import app_files_problem                    # noqa: E402
from elmo_explorer.state.settings import (AppSettings, settings_paths,  # noqa: E402
                                          stored_json, stored_settings)


@pytest.mark.parametrize("damage", ["settings fifo", "settings folder", "log fifo",
                                    "log folder", "data file", "logs file"])
def test_the_apps_own_files_of_the_wrong_kind_are_one_line_before_qt(tmp_path, damage):
    """A FIFO as the settings file hung inside Qt's reader, before any log; a folder as the
    log, or a file as the data folder, stopped the start with a traceback."""
    ini, data = settings_paths(tmp_path)
    assert app_files_problem(str(tmp_path)) is None
    target = {"settings fifo": ini, "settings folder": ini, "log fifo": data / "logs" /
              "elmo-explorer.log", "log folder": data / "logs" / "elmo-explorer.log",
              "data file": data, "logs file": data / "logs"}[damage]
    target.parent.mkdir(parents=True, exist_ok=True)
    if "fifo" in damage:
        os.mkfifo(target)
    elif "folder" in damage:
        target.mkdir()
    else:
        target.write_text("x", encoding="utf-8")
    problem = app_files_problem(str(tmp_path))
    assert problem is not None and str(target) in problem and "--settings-dir" in problem


def test_a_log_linked_to_dev_null_is_still_taken(tmp_path):
    _ini, data = settings_paths(tmp_path)
    (data / "logs").mkdir(parents=True)
    (data / "logs" / "elmo-explorer.log").symlink_to(os.devnull)
    assert app_files_problem(str(tmp_path)) is None


def test_a_remembered_json_setting_that_is_damaged_is_ignored(tmp_path, caplog):
    s = AppSettings(tmp_path)
    for value, why in (("[" * 10000 + "]" * 10000, "nested too deeply"),
                       ('{"k": NaN}', "NaN is not a JSON number"), ("[1, 2]", "not an object"),
                       ("x" * (2 << 20), "characters, over")):
        s.qs.setValue("layers/settings", value)
        with caplog.at_level("WARNING"):
            assert stored_json(s.qs, "layers/settings") == {}
        assert why in caplog.text and "layers/settings" in caplog.text
        caplog.clear()
    s.qs.setValue("layers/settings", '{"sentences": 300}')
    assert stored_json(s.qs, "layers/settings") == {"sentences": 300}
    assert stored_json(None, "layers/settings") == {}


def test_a_remembered_option_out_of_range_is_dropped_with_a_log_line(tmp_path, caplog):
    """A layers ``sentences`` of 10**12 fell back to the default field by field, silently."""
    from elmo_explorer.views.corpus.model import CorpusOptions
    from elmo_explorer.views.layers.model import LayersSettings
    from elmo_explorer.views.reading import CorpusReading

    s = AppSettings(tmp_path)
    s.qs.setValue("layers/settings", json.dumps(
        {"sentences": 10 ** 12, "mdl_sentences": 300, "full": 1, "corpus": "c.txt",
         "colour": "red"}))
    with caplog.at_level("WARNING"):
        got = stored_settings(s.qs, "layers/settings", LayersSettings.from_dict)
    assert got.sentences == LayersSettings().sentences and got.mdl_sentences == 300
    assert got.corpus == "c.txt" and got.full == LayersSettings().full
    line = caplog.text
    assert "layers/settings" in line and "sentences=1000000000000" in line
    assert "full=1" in line and "colour='red'" in line and "mdl_sentences" not in line
    caplog.clear()                                      # said once: written back as read
    with caplog.at_level("WARNING"):
        assert stored_settings(s.qs, "layers/settings", LayersSettings.from_dict) == got
    assert caplog.text == "" and "colour" not in s.qs.value("layers/settings", "", type=str)
    s.qs.setValue("corpus/options", json.dumps({"k": 12, "k_max": 6}))   # before 2026-12-08
    with caplog.at_level("WARNING"):
        assert stored_settings(s.qs, "corpus/options", CorpusOptions.from_dict).k == 12
    assert "k_max=6" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING"):
        assert stored_settings(s.qs, "corpus/options", CorpusOptions.from_dict).k == 12
    assert caplog.text == ""
    caplog.clear()
    s.qs.setValue("corpus/options", json.dumps({"k": 0, "map_scope": "all", "same_word": False}))
    with caplog.at_level("WARNING"):
        got = stored_settings(s.qs, "corpus/options", CorpusOptions.from_dict)
    assert (got.k, got.map_scope, got.same_word) == (CorpusOptions().k, "all", False)
    assert "k=0" in caplog.text and "map_scope" not in caplog.text
    caplog.clear()
    s.qs.setValue("reading", json.dumps({"pretokenized": True, "split_sentences": "x" * 500}))
    with caplog.at_level("WARNING"):
        got = stored_settings(s.qs, "reading", CorpusReading.from_dict)
    assert got.pretokenized is True and got.split_sentences == CorpusReading().split_sentences
    assert "split_sentences='xxx" in caplog.text and "…" in caplog.text
    assert len(caplog.text) < 400                             # a long value is shortened
    caplog.clear()
    s.qs.setValue("layers/settings", json.dumps({"sentences": 300, "full": True}))
    with caplog.at_level("WARNING"):
        assert stored_settings(s.qs, "layers/settings", LayersSettings.from_dict).sentences == 300
    assert caplog.text == ""                                  # all taken: nothing said


def test_a_remembered_checkpoint_whose_name_cannot_be_looked_up_is_gone():
    """300 characters in one name (ENAMETOOLONG) stopped the start with an OSError."""
    long = "/tmp/" + "a" * 300
    assert remembered_checkpoint(long) == (None, long)


def test_an_autosave_that_cannot_be_read_is_kept_aside_not_deleted(tmp_path, caplog):
    """A newer version's autosave, or a damaged one, was passed over and deleted by the clean
    exit that followed; a pid out of range raised OverflowError, and 0 or -1 counted as alive
    (os.kill(0, 0) signals this process's group), so recovery was never offered."""
    from elmo_engine.io.workspace_file import WorkspaceData, save_workspace

    import numpy as np

    path = recovery.autosave_path(tmp_path)
    save_workspace(path, WorkspaceData(sentences=["the bank"],
                                       arrays={"x": np.arange(3, dtype=np.float32)}))
    doc = json.loads(path.read_text("utf-8"))
    arrays = doc["arrays"]["file"] if isinstance(doc.get("arrays"), dict) else None
    doc["version"] = 99
    path.write_text(json.dumps(doc), "utf-8")
    with caplog.at_level("WARNING"):
        assert recovery.find_recovery(tmp_path) is None
    kept = [p for p in tmp_path.iterdir() if ".unreadable-" in p.name]
    assert len(kept) == 1 and kept[0].is_dir() and not path.exists()
    assert "cannot be read" in caplog.text
    inside = sorted(p.name for p in kept[0].iterdir())
    assert inside[-1] == path.name and inside[0].endswith(".npz"), inside   # with its arrays
    assert arrays is None or arrays in inside
    assert json.loads((kept[0] / path.name).read_text("utf-8"))["version"] == 99   # whole
    recovery.discard_autosave(tmp_path)                                  # the clean exit
    assert sorted(p.name for p in kept[0].iterdir()) == inside
    for pid in (2 ** 64, 0, -1):
        save_workspace(path, WorkspaceData(sentences=["the bank"]))
        doc = json.loads(path.read_text("utf-8"))
        doc["session"] = {"pid": pid, "host": recovery._host()}
        path.write_text(json.dumps(doc), "utf-8")
        found = recovery.find_recovery(tmp_path)
        assert found is not None and found.n_sentences == 1, pid


def test_a_remembered_choice_out_of_range_falls_back_and_says_so(tmp_path, caplog):
    s = AppSettings(tmp_path)
    s.qs.setValue("model/device", "cuda:99")
    s.qs.setValue("model/precision", "fp8")
    with caplog.at_level("WARNING"):
        assert (s.device, s.precision) == ("auto", "fp32")
    assert "model/device='cuda:99'" in caplog.text and "model/precision='fp8'" in caplog.text
