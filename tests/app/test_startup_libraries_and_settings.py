"""Issue 29, item 5: start-up on a bare Linux and settings per installation.

* Qt's xcb platform plugin needs system libraries; when one is missing the app names it and its
  Debian/Ubuntu package in one line and exits 1, before Qt would abort (the loader is
  monkeypatched here: no library is removed);
* the README's first command installs every package the check names;
* checkpoint paths are remembered absolute, a remembered checkpoint that is gone falls back to the
  demo model with a one-line notice (stderr and the status bar);
* without ``--settings-dir`` every installation (checkout) has its own settings file.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("pytestqt")

import elmo_explorer.shell.dialogs
from elmo_explorer.shell import startup
from elmo_explorer.state import settings as settings_mod
from elmo_explorer.state.settings import AppSettings

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.gui, pytest.mark.usefixtures("torch_one_thread")]


# ---- the xcb plugin's libraries -----------------------------------------------------------------
LDD_OUTPUT = """\tlinux-vdso.so.1 (0x00007ffd)
\tlibQt6XcbQpa.so.6 => /venv/PySide6/Qt/plugins/platforms/../../lib/libQt6XcbQpa.so.6 (0x7f)
\tlibxcb-cursor.so.0 => not found
\tlibxcb-icccm.so.4 => not found
\tlibxcb-cursor.so.0 => not found
\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x7f)
"""


def test_ldd_output_is_read_for_every_missing_library(monkeypatch, tmp_path):
    seen = []

    def fake_run(cmd, **kw):
        seen.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, LDD_OUTPUT, "")

    monkeypatch.setattr(subprocess, "run", fake_run)
    plugin = tmp_path / "libqxcb.so"
    assert startup.ldd_missing(plugin) == ["libxcb-cursor.so.0", "libxcb-icccm.so.4"]
    assert seen == [["ldd", str(plugin)]]

    def no_ldd(cmd, **kw):
        raise FileNotFoundError("ldd")

    monkeypatch.setattr(subprocess, "run", no_ldd)
    assert startup.ldd_missing(plugin) is None       # cannot say: the caller falls back


def test_without_ldd_the_loader_error_names_the_library(monkeypatch, tmp_path):
    import ctypes

    def failing_cdll(path, *a, **k):
        raise OSError("libxcb-cursor.so.0: cannot open shared object file: No such file or "
                      "directory")

    monkeypatch.setattr(ctypes, "CDLL", failing_cdll)
    monkeypatch.setattr(startup, "ldd_missing", lambda plugin: None)
    assert startup.missing_qt_libraries(tmp_path / "libqxcb.so") == ["libxcb-cursor.so.0"]


@pytest.mark.parametrize("env, platform, expected", [
    ({}, "linux", True),
    ({"QT_QPA_PLATFORM": "xcb"}, "linux", True),
    ({"QT_QPA_PLATFORM": "offscreen"}, "linux", False),
    ({"WAYLAND_DISPLAY": "wayland-0"}, "linux", False),
    ({"WAYLAND_DISPLAY": "wayland-0", "QT_QPA_PLATFORM": "xcb"}, "linux", True),
    ({}, "darwin", False),
    ({}, "win32", False),
])
def test_only_the_xcb_platform_is_checked(env, platform, expected):
    assert startup.wants_xcb(env, platform) is expected


def test_missing_library_is_one_line_with_its_package(monkeypatch, tmp_path):
    monkeypatch.setattr(startup, "ldd_missing",
                        lambda plugin: ["libxcb-cursor.so.0", "libxkbcommon-x11.so.0"])
    line = startup.qt_library_problem({"DISPLAY": ":0"}, "linux", plugin=tmp_path / "p.so")
    assert line.startswith("elmo-explorer: ") and "\n" not in line
    assert "libxcb-cursor.so.0, libxkbcommon-x11.so.0 are not installed" in line
    assert "sudo apt-get install libxcb-cursor0 libxkbcommon-x11-0" in line
    assert startup.qt_library_problem({"QT_QPA_PLATFORM": "offscreen"}, "linux",
                                      plugin=tmp_path / "p.so") is None
    monkeypatch.setattr(startup, "ldd_missing", lambda plugin: [])
    assert startup.qt_library_problem({"DISPLAY": ":0"}, "linux", plugin=tmp_path / "p.so") is None


def test_the_app_exits_1_naming_the_library_instead_of_qts_abort(monkeypatch, capsys, tmp_path):
    import elmo_explorer.shell.main as app_main

    monkeypatch.setattr(app_main, "QApplicationInstance", lambda: None)
    monkeypatch.setattr(startup, "display_problem", lambda: None)
    monkeypatch.setattr(startup, "xcb_plugin_path", lambda: tmp_path / "libqxcb.so")
    monkeypatch.setattr(startup, "ldd_missing", lambda plugin: ["libxcb-icccm.so.4"])
    monkeypatch.setenv("QT_QPA_PLATFORM", "xcb")
    assert app_main.main(["--settings-dir", str(tmp_path / "s")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "libxcb-icccm.so.4 is not installed" in err[0] and "apt-get install libxcb-icccm4" in err[0]


def test_the_installed_plugin_finds_its_libraries_here():
    """On this machine (the libraries installed) the real check finds nothing missing."""
    plugin = startup.xcb_plugin_path()
    if plugin is None or startup.ldd_missing(plugin) is None:
        pytest.skip("no xcb plugin or no ldd here")
    assert startup.missing_qt_libraries(plugin) == []


def test_readme_first_command_installs_every_package():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first = re.search(r"```bash\n(.*?)```", readme, flags=re.DOTALL).group(1)
    assert "apt-get install" in first and "elmo-explorer" in first
    for package in startup.QT_APT_PACKAGES:
        assert re.search(rf"(?<![\w.-]){re.escape(package)}(?![\w.-])", first), package
    # every package the one-line message can name is installed by the command or a dependency
    named = set(startup.XCB_LIBRARY_PACKAGES.values())
    assert set(startup.QT_APT_PACKAGES) <= named


# ---- settings per installation, absolute checkpoints -------------------------------------
def test_each_installation_has_its_own_settings(monkeypatch, tmp_path):
    monkeypatch.delenv(settings_mod.ENV_DIR, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    files = []
    for clone in ("clone-a", "clone-b"):
        root = tmp_path / "src" / clone
        monkeypatch.setattr(settings_mod, "installation_root", lambda root=root: root)
        s = AppSettings()
        s.last_checkpoint = str(tmp_path / f"model-{clone}")
        s.sync()
        files.append(s.settings_file())
        assert s.settings_file().parent.name.startswith(clone + "-")
        assert Path(tmp_path / "config") in s.settings_file().parents
        assert Path(tmp_path / "data") in s.data_dir().parents
        assert s.data_dir().name == s.settings_file().parent.name
    assert files[0] != files[1] and all(f.is_file() for f in files)
    # a fresh clone (clone-b) does not see clone-a's model; clone-a still does
    assert AppSettings().last_checkpoint == str(tmp_path / "model-clone-b")
    monkeypatch.setattr(settings_mod, "installation_root", lambda: tmp_path / "src" / "clone-a")
    assert AppSettings().last_checkpoint == str(tmp_path / "model-clone-a")


def test_first_launch_of_an_installation_carries_the_old_shared_choices(monkeypatch, tmp_path):
    # the settings file every installation shared before: its device, precision and recent
    # models come along once; its last checkpoint (another checkout's model) does not
    from PySide6.QtCore import QSettings

    monkeypatch.delenv(settings_mod.ENV_DIR, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    shared = tmp_path / "config" / settings_mod.ORG / f"{settings_mod.APP}.ini"
    shared.parent.mkdir(parents=True)
    old = QSettings(str(shared), QSettings.Format.IniFormat)
    old.setValue("model/device", "cpu")
    old.setValue("model/precision", "bf16")
    old.setValue("model/recent", [str(tmp_path / "m1"), str(tmp_path / "m2")])
    old.setValue("model/last_checkpoint", str(tmp_path / "other-checkout-model"))
    old.setValue("app/launched", True)
    old.sync()
    before = shared.read_bytes()
    monkeypatch.setattr(settings_mod, "installation_root", lambda: tmp_path / "src" / "fresh")
    s = AppSettings()
    assert (s.device, s.precision) == ("cpu", "bf16")
    assert s.recent_checkpoints() == [str(tmp_path / "m1"), str(tmp_path / "m2")]
    assert s.last_checkpoint == "" and s.first_launch
    assert shared.read_bytes() == before                      # the old file is only read
    # once: a later change in the old file is not carried again
    s.device = "auto"
    s.sync()
    assert AppSettings().device == "auto"


def test_installation_key_is_stable_and_path_specific(tmp_path):
    a, b = tmp_path / "x" / "elmo", tmp_path / "y" / "elmo"
    assert settings_mod.installation_key(a) == settings_mod.installation_key(a)
    assert settings_mod.installation_key(a) != settings_mod.installation_key(b)
    assert re.fullmatch(r"elmo-[0-9a-f]{10}", settings_mod.installation_key(a))
    # an installed package is named after its environment
    venv = tmp_path / "myenv" / "lib" / "python3.11" / "site-packages"
    assert settings_mod.installation_key(venv).startswith("myenv-")
    # this checkout: the folder above app/
    assert settings_mod.installation_root() == ROOT


def test_checkpoint_paths_are_stored_absolute(app_settings_dir, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    s = AppSettings(app_settings_dir)
    s.last_checkpoint = "models/mine"
    s.add_recent_checkpoint("models/mine")
    s.add_recent_checkpoint(str(tmp_path / "models" / "mine"))     # the same one: not twice
    assert s.last_checkpoint == str(tmp_path / "models" / "mine")
    assert s.recent_checkpoints() == [str(tmp_path / "models" / "mine")]


def test_relative_checkpoint_argument_is_remembered_absolute(qtbot, tmp_path, tiny_checkpoint,
                                                             monkeypatch):
    import os

    import elmo_explorer.shell.views
    from elmo_explorer.shell.main import main

    import elmo_explorer.shell.main_window as mw

    monkeypatch.setattr(elmo_explorer.shell.views, "VIEWS", ())
    monkeypatch.delenv(settings_mod.ENV_DIR, raising=False)
    seen = []                       # the folder a view's own AppSettings() reads during the run
    original = mw.MainWindow.start
    monkeypatch.setattr(mw.MainWindow, "start", lambda self, *a: (
        seen.append(AppSettings().folder), original(self, *a))[-1])
    monkeypatch.chdir(tiny_checkpoint.parent)
    rel = os.path.relpath(tiny_checkpoint)
    assert not Path(rel).is_absolute()
    code = main(["--screenshot", str(tmp_path / "w.png"), "--checkpoint", rel, "--view",
                 "sentences", "--settings-dir", str(tmp_path / "s")])
    assert code == 0
    assert AppSettings(tmp_path / "s").last_checkpoint == str(tiny_checkpoint)
    assert seen == [(tmp_path / "s").resolve()]           # --settings-dir for every view too
    assert settings_mod.ENV_DIR not in __import__("os").environ   # and not after the run


@pytest.fixture
def errors(monkeypatch):
    shown = []
    monkeypatch.setattr(elmo_explorer.shell.dialogs, "show_error",
                        lambda parent, title, msg: shown.append((title, msg)))
    return shown


def test_a_remembered_checkpoint_that_is_gone_is_said_not_silent(
        qtbot, app_settings_dir, tiny_checkpoint, errors, monkeypatch, tmp_path, capsys):
    import elmo_explorer.shell.main_window as mw

    monkeypatch.setattr(mw, "demo_checkpoint", lambda: tiny_checkpoint)
    s = AppSettings(app_settings_dir)
    gone = tmp_path / "moved-away"
    s.last_checkpoint = str(gone)
    s.mark_launched()
    w = mw.MainWindow(s, views=())
    qtbot.addWidget(w)
    w.show()
    w.start(None, "He sat on the bank.")
    qtbot.waitUntil(w.workspace.all_embedded, timeout=60000)
    assert w.workspace.model_spec.path == str(tiny_checkpoint)          # the demo model
    err = [line for line in capsys.readouterr().err.splitlines() if "is gone" in line]
    assert err == [f"elmo-explorer: the last checkpoint {gone} is gone; opened the demo model "
                   "instead"]
    message = w.statusBar().currentMessage()
    assert f"the last checkpoint {gone} is gone" in message and message.startswith("Loaded")
    assert errors == []
    w.workspace.worker.shutdown()


def test_a_remembered_checkpoint_that_exists_is_reopened_quietly(tmp_path):
    import elmo_explorer.shell.main_window as mw

    assert mw.remembered_checkpoint("") == (None, "")
    assert mw.remembered_checkpoint(str(tmp_path)) == (str(tmp_path), "")
    assert mw.remembered_checkpoint(str(tmp_path / "nope")) == (None, str(tmp_path / "nope"))


# ---- the window before torch ---------------------------------------------------------------------
WINDOW_WITHOUT_TORCH = r'''
import json, os, sys, tempfile
os.environ["QT_QPA_PLATFORM"] = "offscreen"
from PySide6.QtWidgets import QApplication
app = QApplication(["elmo-explorer"])
from elmo_explorer.state.settings import AppSettings
from elmo_explorer.shell.main_window import MainWindow
w = MainWindow(AppSettings(tempfile.mkdtemp()))
w.resize(1280, 800); w.show_view("contexts"); w.show(); app.processEvents()
heavy = sorted(m for m in ("torch", "scipy", "sklearn", "umap", "matplotlib", "h5py")
               if m in sys.modules)
w.precision_menu.aboutToShow.emit()                  # the user opens Settings > Precision
bf16 = [a for a in w.precision_menu.actions() if a.data() == "bf16"][0]
from elmo_engine.runtime import cpu_bf16
print(json.dumps({"heavy": heavy, "torch_after_menu": "torch" in sys.modules,
                  "bf16_enabled": bf16.isEnabled(), "offered": cpu_bf16().offered}))
w.close()
'''


def test_the_window_is_built_and_shown_before_torch_is_imported():
    """Every view package, the menus and the status bar load without torch (it took 1.2-1.5 s
    of the window's 2.8 s); the Settings menu asks for the GPU and the CPU's bf16 units when it
    first opens, and then says what this machine offers."""
    import json
    import sys

    out = subprocess.run([sys.executable, "-c", WINDOW_WITHOUT_TORCH], capture_output=True,
                         text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["heavy"] == []
    assert got["torch_after_menu"] is True
    assert got["bf16_enabled"] == got["offered"]


@pytest.mark.parametrize("option", ["--checkpoint", "--sentences", "--screenshot",
                                    "--settings-dir"])
def test_the_apps_paths_that_are_not_utf8_are_refused_before_qt(tmp_path, capsys, option):
    """Qt drops the bytes of a name that are not UTF-8: the settings remembered another folder
    (`…/ck` for `…/ck\\xff`) and the next launch opened another model. Refused as the command
    line refuses them, before Qt starts."""
    import os

    from elmo_explorer.shell.main import main as gui_main

    name = os.fsdecode(os.fsencode(str(tmp_path)) + b"/ck\xff")
    assert gui_main([option, name]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"argument {option}: the file name is not UTF-8: byte 0xFF" in err[0]


@pytest.mark.parametrize("variable", ["ELMO_EXPLORER_SETTINGS_DIR", "ELMO_EXPLORER_DATA"])
def test_the_apps_folders_named_in_the_environment_so_are_refused_too(tmp_path, capsys,
                                                                      monkeypatch, variable):
    """A review: QSettings wrote into `env-\ufffd`, another folder, for a variable naming
    `env-\xff`. The data folder's variable is refused by the command line too."""
    import os

    from elmo_engine.errors import InputError
    from elmo_engine.io import model_store
    from elmo_explorer.shell.main import main as gui_main

    monkeypatch.setenv(variable, os.fsdecode(os.fsencode(str(tmp_path)) + b"/env-\xff"))
    assert gui_main([]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{variable}'s folder name is not UTF-8: byte 0xFF" in err[0]
    if variable == "ELMO_EXPLORER_DATA":
        with pytest.raises(InputError, match="ELMO_EXPLORER_DATA's folder name is not UTF-8"):
            model_store.data_dir()
