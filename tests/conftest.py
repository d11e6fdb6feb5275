"""Test setup shared by every test: offscreen Qt, the fixtures, the optional data sets, the
process-wide settings, small torch thread use. What tests share that is not a fixture (places,
the tiny checkpoint writer, samples, fuzz helpers) is in ``tests/support.py``.

``tests/engine/`` tests the engine and never imports Qt (CI runs it again in a venv without
PySide6); ``tests/app/`` tests the desktop app (pytest-qt, offscreen). The published test
checkpoints are vendored under ``tests/fixtures/elmo/``; only the large data sets are read from
``../shared/data`` beside the checkout, and the tests that need them skip, saying so, when it is
not there.
"""
from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest

from elmo_engine import runtime
from support import DATA, FIXTURES, LAYERS_SENTENCES, REPO, need, write_tiny_checkpoint

runtime.configure()          # as every entry point does: strict float32 (see elmo_engine.runtime)


# The README's command runs the suite in worker processes (pytest-xdist, ``-n auto``): one per
# core this process may use, at most MAX_WORKERS. Each worker holds torch, Qt and the tests'
# models, and its tests use one torch thread, so more workers than cores only queue; past four
# the suite is short anyway and the memory is not. Every test makes its own temporary folders,
# settings folder and loopback ports, so none depends on what runs in the other workers.
MAX_WORKERS = 4


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config) -> int:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cores, MAX_WORKERS))


def pytest_collection_finish(session):
    """The app's tests run under the app's process-wide settings (elmo_explorer.shell.startup): the
    short GIL switch interval its responsiveness tests depend on. Torch's thread count is left
    as the engine's tests have it."""
    if any(item.nodeid.startswith("tests/app/") for item in session.items):
        from elmo_explorer.shell.startup import GIL_SWITCH_S

        runtime.configure(gil_switch_s=GIL_SWITCH_S)


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return FIXTURES


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return need(DATA)


# ---- Qt app fixtures (app helper) ----------------------------------------------------------
@pytest.fixture(autouse=True)
def _never_user_settings(tmp_path_factory, monkeypatch):
    """Every test keeps the app's settings and logs, and the command line's log of unexpected
    errors, in a temporary folder, never the user's."""
    monkeypatch.setenv("ELMO_EXPLORER_SETTINGS_DIR", str(tmp_path_factory.getbasetemp() / "app-settings"))
    monkeypatch.setenv("ELMO_EXPLORER_LOG_DIR", str(tmp_path_factory.getbasetemp() / "cli-log"))


@pytest.fixture
def app_settings_dir(tmp_path, monkeypatch) -> Path:
    """A per-test settings + data folder; the user's real QSettings are never touched."""
    folder = tmp_path / "settings"
    folder.mkdir()
    monkeypatch.setenv("ELMO_EXPLORER_SETTINGS_DIR", str(folder))
    return folder


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory) -> Path:
    """Folder of a tiny random checkpoint (2 LSTM layers, P=16), made once per session."""
    return write_tiny_checkpoint(tmp_path_factory.mktemp("tiny_ckpt"))


@pytest.fixture(scope="session")
def torch_one_thread():
    """One intra-op torch thread: on a shared 2-core machine more threads are ~10x slower."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def make_checkpoint():
    """``make_checkpoint(folder, seed=0, n_layers=2)``: another tiny random checkpoint."""
    return write_tiny_checkpoint


@pytest.fixture(scope="session")
def layers_sentences():
    """The small corpus of the layers analyses (:data:`LAYERS_SENTENCES`)."""
    return list(LAYERS_SENTENCES)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO
