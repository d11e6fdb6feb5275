"""The app's process-wide settings, set once at start-up by :func:`elmo_explorer.shell.main.main`.

They go through :func:`elmo_engine.runtime.configure`, the one place that sets process-wide
state (see its docstring); here is what the desktop app asks of it:

* **torch threads**: one fewer than the cores, so that the GUI thread keeps a core while the
  worker runs the model (unless ``OMP_NUM_THREADS`` says otherwise);
* **GIL switch interval** at most :data:`GIL_SWITCH_S`: the worker's pure-Python stretches
  (tokenizing a big file) hold the GIL for Python's switch interval, 5 ms by default, every
  time the GUI thread needs it, and painting one table calls into Python a hundred times: a
  5 ms interval froze the window for up to a second while a 2 MB file was tokenized
  (tests/app/test_main_window.py). At 0.5 ms the GUI waits a tenth as long; the worker loses
  nothing while the GUI does not ask;
* strict float32 for torch (as every entry point).
"""
from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import List, Optional

from elmo_explorer.shell.view_names import VIEWS

GIL_SWITCH_S = 0.0005  # how long the worker may keep the GIL while the GUI thread waits for it


def gui_threads() -> Optional[int]:
    """Torch threads for the app: the cores but one, or None when ``OMP_NUM_THREADS`` is set."""
    if os.environ.get("OMP_NUM_THREADS"):
        return None
    return max(1, (os.cpu_count() or 2) - 1)


def configure_process() -> None:
    """Set the app's process-wide settings (call once, before the window is built)."""
    from elmo_engine import runtime

    runtime.configure(threads=gui_threads(), gil_switch_s=GIL_SWITCH_S)


# ---- a display to draw on --------------------------------------------------------------------
#: the one line printed without a display (``{why}``: what is missing); it names every view
NO_DISPLAY_HINT = ("elmo-explorer: no display to open the window on ({why}); without a display run "
                   "QT_QPA_PLATFORM=offscreen elmo-explorer --screenshot shot.png "
                   f"[--view {'|'.join(VIEWS)}], or use a subcommand "
                   "(elmo-explorer --help)")


#: where X servers put their local sockets (fixed by the X11 convention on every Unix, not a
#: path of any one machine)
X11_SOCKET_DIR = os.path.join(os.sep, "tmp", ".X11-unix")


def _x_socket_reachable(display: str, timeout_s: float = 1.0) -> bool:
    """Whether an X server answers at ``display`` (``:0``, ``unix:1.0``, ``host:10.0``)."""
    import socket

    host, _, rest = display.rpartition(":")
    try:
        number = int(rest.split(".")[0])
    except ValueError:
        return True                                  # a form we do not know: let Qt try
    if host in ("", "unix") or host.startswith("/"):
        if host.startswith("/"):                     # launchd-style socket path (macOS XQuartz)
            return os.path.exists(display)
        path = os.path.join(X11_SOCKET_DIR, f"X{number}")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout_s)
            try:
                s.connect(path)
                return True
            except OSError:
                pass
        try:                                          # Linux's abstract socket namespace
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(timeout_s)
                s.connect("\0" + path)
                return True
        except OSError:
            return False
    try:
        with socket.create_connection((host, 6000 + number), timeout=timeout_s):
            return True
    except OSError:
        return False


def display_problem(environ=None, platform: Optional[str] = None) -> Optional[str]:
    """Why the window cannot open (no display, an X server that does not answer), or None.

    Checked before Qt starts: Qt's xcb plugin aborts the process (status 134) with a page of
    messages when it finds no display. Only Linux/BSD with the default or the xcb platform are
    checked; any other ``QT_QPA_PLATFORM`` (offscreen, wayland, vnc, …) is taken at its word.
    """
    import sys

    env = os.environ if environ is None else environ
    platform = sys.platform if platform is None else platform
    if platform.startswith(("win", "darwin", "cygwin")):
        return None
    qpa = env.get("QT_QPA_PLATFORM", "").split(":")[0].strip()
    if qpa and qpa != "xcb":
        return None
    display = env.get("DISPLAY", "")
    if not qpa and env.get("WAYLAND_DISPLAY"):
        return None                                   # Qt uses Wayland
    if not display:
        return "DISPLAY is not set"
    if not _x_socket_reachable(display):
        return f"no X server answers at DISPLAY={display}"
    return None


def _writable_folder(folder: Path, option: str) -> Optional[str]:
    """Why ``folder`` cannot be created or written (one line naming ``option``), or None."""
    if folder.exists() and not folder.is_dir():
        return f"elmo-explorer: {option} {folder} is a file, not a folder"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        return f"elmo-explorer: {option} {folder} cannot be created ({e.strerror or e})"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"elmo-explorer: {option} {folder} is not writable"
    return None


def startup_problem(screenshot: Optional[str], settings_dir: Optional[str],
                    environ=None) -> Optional[str]:
    """Check the paths the app will write before Qt starts: one line saying what is wrong
    (the caller prints it and exits 1), or None.

    * ``--screenshot PATH``: not a folder; its folder (or the nearest one that exists: missing
      folders are created) is a folder, not a file, and writable;
    * ``--settings-dir DIR`` (or ``ELMO_EXPLORER_SETTINGS_DIR``): a folder that can be created
      and written, not a file;
    * without them, the standard settings and data folders under the home folder (a read-only
      home gets a line suggesting ``--settings-dir``).
    """
    env = os.environ if environ is None else environ
    if screenshot:
        shot = Path(screenshot)
        parent = shot.parent if str(shot.parent) else Path(".")
        if shot.is_dir():
            return (f"elmo-explorer: --screenshot {shot} is a folder; give a file name such as "
                    f"{shot / 'window.png'}")
        if shot.exists() and not shot.is_file():
            return f"elmo-explorer: --screenshot {shot} is not a regular file"
        while not parent.exists() and parent != parent.parent:   # missing folders are created
            parent = parent.parent
        if not parent.is_dir():
            return f"elmo-explorer: --screenshot {shot}: {parent} is a file, not a folder"
        if not os.access(parent, os.W_OK | os.X_OK):
            return f"elmo-explorer: --screenshot {shot}: cannot write in {parent} (read-only)"
    folder = settings_dir or env.get("ELMO_EXPLORER_SETTINGS_DIR")
    if folder:
        return _writable_folder(Path(folder), "--settings-dir")
    home = Path(env.get("HOME") or Path.home())
    for var, default in (("XDG_CONFIG_HOME", home / ".config"),
                         ("XDG_DATA_HOME", home / ".local" / "share")):
        base = Path(env.get(var) or default)
        problem = _writable_folder(base, "the settings folder")
        if problem:
            return problem + " (a read-only home folder?); pass --settings-dir DIR"
    return None


def app_files_problem(settings_dir: Optional[str]) -> Optional[str]:
    """The files the app keeps between sessions, checked before Qt opens them: the settings
    file and the log are regular files, the data and log folders are folders. A FIFO there hung
    the start (inside Qt's settings reader, before any log), a folder where the log goes, or a
    file where the data folder goes, stopped it with a traceback. One line naming the path, or
    None. (The last session's sentences are read bounded, as regular files only, and ignored
    with a log line when they are not: :meth:`MainWindow._session_text`.)"""
    import stat

    from elmo_explorer.shell.logging_setup import LOG_NAME
    from elmo_explorer.state.settings import settings_paths

    ini, data = settings_paths(Path(settings_dir) if settings_dir else None)
    for path, folder, what in ((ini, False, "its settings"), (data, True, "its data"),
                               (data / "logs", True, "its logs"),
                               (data / "logs" / LOG_NAME, False, "its log")):
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:
            continue
        except OSError as e:          # a loop of links: Qt writes a file in its place
            if e.errno == errno.ELOOP:
                continue
            return f"elmo-explorer: cannot use {path} ({e.strerror}); the app keeps {what} there"
        if folder and not stat.S_ISDIR(mode):
            return (f"elmo-explorer: {path} is not a folder; the app keeps {what} there: move "
                    "it away, or pass --settings-dir DIR")
        # a file, or a character device (a log linked to /dev/null is a choice); a FIFO
        # blocks its opener, a folder or a socket cannot be opened
        if not folder and not (stat.S_ISREG(mode) or stat.S_ISCHR(mode)):
            kind = "a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else \
                "not a regular file"
            return (f"elmo-explorer: {path} is {kind}; the app keeps {what} there in a regular "
                    "file: move it away, or pass --settings-dir DIR")
    return None


# ---- the system libraries of Qt's xcb platform plugin ---------------------------------------
#: every library outside the PySide6 wheel that Qt's xcb platform plugin and the Qt libraries it
#: loads need (``ldd`` of PySide6 6.10's ``Qt/plugins/platforms/libqxcb.so`` on a minimal Debian 12
#: image), with the Debian/Ubuntu package that ships it. The README's first command installs the
#: packages of the first group; the others come with them as their dependencies.
XCB_LIBRARY_PACKAGES = {
    "libxcb-cursor.so.0": "libxcb-cursor0",
    "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-image.so.0": "libxcb-image0",
    "libxcb-keysyms.so.1": "libxcb-keysyms1",
    "libxcb-randr.so.0": "libxcb-randr0",
    "libxcb-render-util.so.0": "libxcb-render-util0",
    "libxcb-shape.so.0": "libxcb-shape0",
    "libxcb-xkb.so.1": "libxcb-xkb1",
    "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
    "libX11-xcb.so.1": "libx11-xcb1",
    "libEGL.so.1": "libegl1",
    "libGL.so.1": "libgl1",
    "libfontconfig.so.1": "libfontconfig1",
    "libdbus-1.so.3": "libdbus-1-3",
    "libglib-2.0.so.0": "libglib2.0-0",
    "libgthread-2.0.so.0": "libglib2.0-0",
    # installed with the packages above (their dependencies)
    "libxcb.so.1": "libxcb1",
    "libxcb-render.so.0": "libxcb-render0",
    "libxcb-shm.so.0": "libxcb-shm0",
    "libxcb-sync.so.1": "libxcb-sync1",
    "libxcb-util.so.1": "libxcb-util1",
    "libxcb-xfixes.so.0": "libxcb-xfixes0",
    "libxcb-glx.so.0": "libxcb-glx0",
    "libxkbcommon.so.0": "libxkbcommon0",
    "libX11.so.6": "libx11-6",
    "libfreetype.so.6": "libfreetype6",
}
#: what the README's first command installs (apt resolves the rest)
QT_APT_PACKAGES = ("libxcb-cursor0", "libxcb-icccm4", "libxcb-image0", "libxcb-keysyms1",
                   "libxcb-randr0", "libxcb-render-util0", "libxcb-shape0", "libxcb-xkb1",
                   "libxkbcommon-x11-0", "libx11-xcb1", "libegl1", "libgl1", "libfontconfig1",
                   "libdbus-1-3", "libglib2.0-0")
LDD_TIMEOUT_S = 20.0


def xcb_plugin_path() -> Optional[Path]:
    """PySide6's xcb platform plugin (``libqxcb.so``), or None where there is none (not Linux,
    a Qt without it). Found without importing Qt."""
    import importlib.util

    spec = importlib.util.find_spec("PySide6")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        plugin = Path(folder) / "Qt" / "plugins" / "platforms" / "libqxcb.so"
        if plugin.is_file():
            return plugin
    return None


def ldd_missing(plugin: Path) -> Optional[List[str]]:
    """The libraries ``ldd`` reports 'not found' for ``plugin`` and everything it loads, or
    None when ``ldd`` cannot say (not installed, failed)."""
    import re
    import subprocess

    try:
        done = subprocess.run(["ldd", str(plugin)], capture_output=True, text=True,
                              timeout=LDD_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0 and "not found" not in done.stdout:
        return None
    found = re.findall(r"^\s*(\S+)\s+=>\s+not found", done.stdout, flags=re.MULTILINE)
    return list(dict.fromkeys(found))


def dlopen_missing(plugin: Path) -> List[str]:
    """Without ``ldd``: load the plugin and read the first missing library from the loader's
    error (the dynamic loader stops at the first one)."""
    import ctypes
    import re

    try:
        ctypes.CDLL(str(plugin))
    except OSError as e:
        m = re.search(r"([^\s:/]+\.so[.\d]*): cannot open shared object file", str(e))
        return [m.group(1)] if m else []
    return []


def missing_qt_libraries(plugin: Path) -> List[str]:
    """The system libraries the xcb plugin needs and does not find (``ldd``, else ``dlopen``)."""
    missing = ldd_missing(plugin)
    return dlopen_missing(plugin) if missing is None else missing


def wants_xcb(environ=None, platform: Optional[str] = None) -> bool:
    """Whether Qt will load its xcb platform plugin (Linux/BSD, no other platform asked for)."""
    import sys

    env = os.environ if environ is None else environ
    platform = sys.platform if platform is None else platform
    if platform.startswith(("win", "darwin", "cygwin")):
        return False
    qpa = env.get("QT_QPA_PLATFORM", "").split(":")[0].strip()
    if qpa:
        return qpa == "xcb"
    return not env.get("WAYLAND_DISPLAY")


def qt_library_problem(environ=None, platform: Optional[str] = None,
                       plugin: Optional[Path] = None) -> Optional[str]:
    """One line naming the system libraries Qt's xcb platform plugin cannot find and the
    Debian/Ubuntu packages that ship them, or None. Checked before Qt starts: without them Qt
    prints a page and aborts (status 134) instead."""
    if not wants_xcb(environ, platform):
        return None
    plugin = plugin if plugin is not None else xcb_plugin_path()
    if plugin is None:
        return None
    libs = missing_qt_libraries(plugin)
    if not libs:
        return None
    packages = list(dict.fromkeys(XCB_LIBRARY_PACKAGES.get(lib, "?") for lib in libs))
    known = [p for p in packages if p != "?"]
    install = (f"on Debian/Ubuntu: sudo apt-get install {' '.join(known)}" if known
               else "install the package that ships it")
    return (f"elmo-explorer: Qt's xcb platform plugin cannot start: {', '.join(libs)} "
            f"{'is' if len(libs) == 1 else 'are'} not installed ({install}; the README's first "
            f"command lists every library the app needs)")
