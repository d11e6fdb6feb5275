"""GUI entry point: ``elmo-explorer`` (no subcommand) → :func:`main`.

``--screenshot PATH`` starts the app (also offscreen), waits on signals until the model is loaded,
every sentence is embedded and the chosen view reports ``is_ready()``, saves a PNG of the window
(atomically) and exits 0 (1 when the model cannot be loaded, 2 on timeout).

With no display (no ``DISPLAY``, or an X server that does not answer) and no other Qt platform
asked for, it prints one line naming ``QT_QPA_PLATFORM=offscreen`` and ``--screenshot`` and
exits 2, before Qt starts (Qt would abort with status 134). When Qt's xcb platform plugin would
not load (a system library missing), it prints one line naming the library and its Debian/Ubuntu
package and exits 1, also before Qt starts.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import List, Optional

from elmo_explorer.shell.view_names import VIEW_CHOICES

log = logging.getLogger(__name__)

#: the title of the app's options in ``elmo-explorer --help`` (which also lists the commands)
APP_OPTIONS_TITLE = "desktop app (no COMMAND)"


def build_parser(add_help: bool = True) -> argparse.ArgumentParser:
    """The app's parser. ``add_help=False``: its options only, grouped under
    :data:`APP_OPTIONS_TITLE`, for ``elmo-explorer --help`` to list beside the commands
    (:mod:`elmo_explorer.entry`)."""
    parser = argparse.ArgumentParser(prog="elmo-explorer", description="ELMo Explorer desktop app",
                                     add_help=add_help)
    p = parser.add_argument_group(APP_OPTIONS_TITLE)
    p.add_argument("--checkpoint", metavar="PATH",
                   help="checkpoint folder or file, or a downloaded published model's name "
                        "(elmo-explorer models list) to load (default: the last one, else the demo)")
    p.add_argument("--sentences", metavar="FILE", help="file of sentences, one per line (or group<TAB>sentence)")
    p.add_argument("--view", choices=VIEW_CHOICES, metavar="VIEW",
                   help=f"view to show first: {', '.join(VIEW_CHOICES)}")
    p.add_argument("--screenshot", metavar="PATH",
                   help="save a PNG of the window once the view is ready, then exit")
    p.add_argument("--size", metavar="WxH", default=None,
                   help="window size, e.g. 1280x720 (default: the saved size)")
    p.add_argument("--settings-dir", metavar="DIR",
                   help="keep settings, logs and the session in DIR (default: a folder for this "
                        "installation under the user's standard locations; also "
                        "ELMO_EXPLORER_SETTINGS_DIR)")
    p.add_argument("--timeout", type=float, default=600.0,
                   help="with --screenshot: give up after this many seconds (exit 2)")
    return parser


def _parse_size(text: str):
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise SystemExit(f"elmo-explorer: --size must look like 1280x720, got {text!r}") from None
    if w < 200 or h < 150:
        raise SystemExit("elmo-explorer: --size is too small (at least 200x150)")
    return w, h


def _name_problem(args) -> Optional[str]:
    """The command line's rule for the app's own paths: a name whose bytes are not UTF-8 is
    refused before Qt starts (Qt drops such bytes: the settings remembered another folder, and
    the next launch opened another model; a workspace or report naming it failed to save)."""
    from elmo_engine.files import name_problem
    from elmo_engine.io.model_store import DATA_ENV
    from elmo_explorer.state.settings import ENV_DIR

    for option, value in (("--checkpoint", args.checkpoint), ("--sentences", args.sentences),
                          ("--screenshot", args.screenshot), ("--settings-dir", args.settings_dir)):
        problem = name_problem(value) if value else None
        if problem:
            return f"elmo-explorer: error: argument {option}: {problem}"
    for variable in (ENV_DIR, DATA_ENV):             # the folders the app writes, named so
        problem = name_problem(os.environ.get(variable, ""), f"{variable}'s folder name")
        if problem:
            return f"elmo-explorer: error: {problem}"
    return None


def QApplicationInstance():
    """The running QApplication, if any (tests create one), without importing Qt otherwise."""
    if "PySide6.QtWidgets" not in sys.modules:
        return None
    from PySide6.QtWidgets import QApplication

    return QApplication.instance()


def main(argv: Optional[List[str]] = None) -> int:
    """Run the app; ``argv`` excludes the program name. Returns the exit code."""
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    size = _parse_size(args.size) if args.size else None
    from elmo_explorer.shell.startup import (NO_DISPLAY_HINT, app_files_problem, display_problem,
                                             qt_library_problem, startup_problem)

    problem = (_name_problem(args) or startup_problem(args.screenshot, args.settings_dir)
               or app_files_problem(args.settings_dir))
    if problem is not None:                     # before Qt starts: one line, exit 1
        print(problem, file=sys.stderr)
        return 1
    if QApplicationInstance() is None:
        why = display_problem()
        if why is not None:
            print(NO_DISPLAY_HINT.format(why=why), file=sys.stderr)
            return 2
        missing = qt_library_problem()            # Qt would abort (134): name the library
        if missing is not None:
            print(missing, file=sys.stderr)
            return 1
    from PySide6.QtCore import qInstallMessageHandler
    from PySide6.QtWidgets import QApplication

    from elmo_explorer.shell.logging_setup import close_logging, route_qt_messages, setup_logging
    from elmo_explorer.state.settings import ENV_DIR, AppSettings
    from elmo_explorer.shell.startup import configure_process

    if args.checkpoint:                          # a published model's name → its folder
        from elmo_engine.errors import ElmoError
        from elmo_engine.io.model_store import resolve_checkpoint_argument
        from elmo_explorer.state.settings import absolute_path

        try:
            # absolute against the folder the app was launched from: the settings remember
            # it, and a relative path would mean another file from another folder (issue 29)
            args.checkpoint = absolute_path(resolve_checkpoint_argument(args.checkpoint))
        except ElmoError as e:
            print(f"elmo-explorer: {e}", file=sys.stderr)
            return 1
    sentences_text, groups = None, None
    if args.sentences:
        from elmo_engine.io.datasets.sentences import read_grouped_sentences
        from elmo_engine.errors import ElmoError

        try:
            pairs = read_grouped_sentences(args.sentences)
            sentences_text = "\n".join(s for _g, s in pairs)
            groups = {s: g for g, s in pairs if g}
        except ElmoError as e:
            print(f"elmo-explorer: {e}", file=sys.stderr)
            return 1
    app = QApplication.instance() or QApplication([sys.argv[0] if sys.argv else "elmo-explorer"])
    app.setApplicationName("ELMo Explorer")
    app.setOrganizationName("ELMoExplorer")
    settings = AppSettings(Path(args.settings_dir) if args.settings_dir else None)
    # every AppSettings() of this run (views open their own) reads the same folder
    previous_env = os.environ.get(ENV_DIR)
    if args.settings_dir:
        os.environ[ENV_DIR] = str(settings.folder.resolve())
    log_path = setup_logging(settings.log_dir())
    previous_handler = route_qt_messages()
    log.info("starting; log file %s", log_path)
    configure_process()
    try:
        return _run(app, args, settings, size, sentences_text, groups)
    except Exception as e:  # the last resort: one line here, the traceback in the log
        log.error("unexpected error", exc_info=True)
        print(f"elmo-explorer: error: {_one_line(e)} (details in {log_path})", file=sys.stderr)
        return 1
    finally:
        close_logging()
        qInstallMessageHandler(previous_handler)
        if previous_env is None:
            os.environ.pop(ENV_DIR, None)
        else:
            os.environ[ENV_DIR] = previous_env


def _one_line(e: BaseException) -> str:
    if isinstance(e, MemoryError):
        return "out of memory"
    if isinstance(e, RecursionError):
        return "the input is nested too deeply to process"
    text = " ".join(str(e).split())[:300]
    return f"unexpected {type(e).__name__}" + (f": {text}" if text else "")


def _run(app, args, settings, size, sentences_text: Optional[str], groups=None) -> int:
    from elmo_explorer.shell.logging_setup import install_excepthooks
    from elmo_explorer.shell.main_window import MainWindow

    window = MainWindow(settings)
    from elmo_explorer.persistence.workspace_actions import install_workspace_actions

    actions = install_workspace_actions(window, recover=not args.screenshot)
    if args.screenshot:
        actions.prompt_on_close = False          # a picture run never stops to ask
    worker = window.workspace.worker
    try:
        if not args.screenshot:
            install_excepthooks(lambda m: window.show_error("Unexpected error", m))
        if size is None and args.screenshot:
            size = (1280, 800)                   # reproducible pictures, whatever was saved
        if size is not None:
            window.resize(*size)
        if args.view:
            try:
                window.show_view(args.view)
            except KeyError as e:
                print(f"elmo-explorer: {e.args[0]}", file=sys.stderr)
                return 1
        shooter = None
        if args.screenshot:
            from elmo_explorer.shell.screenshot import Screenshot

            shooter = Screenshot(window, args.screenshot, args.view, args.timeout)
        app.aboutToQuit.connect(worker.shutdown)
        window.show()
        window.start(args.checkpoint, sentences_text, groups)
        try:
            code = app.exec()
        finally:
            app.aboutToQuit.disconnect(worker.shutdown)
        return shooter.exit_code if shooter is not None else code
    finally:
        if not worker.shutdown(timeout_s=5.0):
            _exit_now(worker)
        _destroy(window)


def _exit_now(worker) -> None:
    """A job ignores cancel (e.g. a one-time compile): leave without waiting or crashing.

    Destroying a running QThread aborts the process, so the process ends here, after the log and
    the standard streams are flushed (the settings were saved when the window closed).
    """
    from elmo_explorer.shell.logging_setup import close_logging

    log.error("quitting while %r is still running; not waiting for it", worker.current_job())
    close_logging()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _destroy(window) -> None:
    """Delete the window and its panels now, while the QApplication is alive.

    Left to interpreter exit, widgets (pyqtgraph plots in particular) are destroyed after the
    application object and the process crashed on the way out.
    """
    from PySide6.QtCore import QCoreApplication, QEvent

    window.hide()
    window.deleteLater()
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)


if __name__ == "__main__":
    sys.exit(main())
