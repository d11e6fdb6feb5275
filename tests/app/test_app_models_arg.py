"""The app's ``--checkpoint NAME``: a downloaded published model opens by its catalogue name; a
name not downloaded is one line saying what to run (docs/guide/models.md)."""
from __future__ import annotations

import hashlib
import shutil

import pytest

pytest.importorskip("pytestqt")

from elmo_engine.io import model_store
from elmo_engine.io.catalogue import load_catalogue
from elmo_explorer.shell.main import main
from elmo_explorer.shell.main_window import MainWindow

from support import FIXTURES

pytestmark = [pytest.mark.gui, pytest.mark.usefixtures("torch_one_thread")]


def install_small(data) -> None:
    """What ``models get small`` leaves, from the vendored test checkpoint (no network)."""
    m = load_catalogue().require("small")
    folder = data / "models" / "small"
    folder.mkdir(parents=True)
    records = {}
    for role, src in (("options", "options.json"), ("weights", "lm_weights.hdf5")):
        name = m.file(role).name
        shutil.copyfile(FIXTURES / "allennlp" / src, folder / name)
        body = (folder / name).read_bytes()
        records[name] = model_store.FileRecord(name, role, len(body),
                                               hashlib.sha256(body).hexdigest(), "test", "now")
    model_store.write_manifest(folder, "small", records)


def test_a_downloaded_name_opens_and_a_missing_one_says_what_to_run(qtbot, tmp_path,
                                                                      monkeypatch, capsys):
    import elmo_explorer.shell.views

    monkeypatch.setattr(elmo_explorer.shell.views, "VIEWS", ())
    monkeypatch.setenv("ELMO_EXPLORER_DATA", str(tmp_path / "data"))
    settings = ["--settings-dir", str(tmp_path / "s")]
    assert main(["--checkpoint", "small", *settings]) == 1
    assert "run `elmo-explorer models get small`" in capsys.readouterr().err
    install_small(tmp_path / "data")
    started = []
    real = MainWindow.start

    def start(self, checkpoint, *a, **k):
        started.append((self, checkpoint))
        return real(self, checkpoint, *a, **k)

    monkeypatch.setattr(MainWindow, "start", start)
    out = tmp_path / "shot.png"
    assert main(["--screenshot", str(out), "--checkpoint", "small", "--view", "sentences",
                 "--size", "900x600", *settings]) == 0
    (window, checkpoint), = started
    folder = tmp_path / "data" / "models" / "small"
    assert checkpoint == str(folder)
    assert out.stat().st_size > 10_000
    info = window.workspace.model_info                  # the model the window loaded
    assert info.name == "small" and info.weights_path == str(
        folder / load_catalogue().require("small").file("weights").name)
