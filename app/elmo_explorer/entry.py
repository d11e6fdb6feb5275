"""The ``elmo-explorer`` command: the desktop app, or a headless subcommand (``embed``, …).

The one place that composes the two halves of the project: a subcommand goes to the engine's
command line (:mod:`elmo_engine.cli`, no Qt imported), anything else starts the app
(:mod:`elmo_explorer.shell.main`); ``--help`` lists both, the app's options and the commands.
Neither path imports torch, Qt or numpy before it needs them: ``--version``, ``--help`` and a
usage error answer at once (tests/app/test_entry.py). No other module of the app imports
:mod:`elmo_engine.cli` (tests/engine/test_import_contract.py).
"""
from __future__ import annotations

import sys
from typing import List, Optional

HELP_FLAGS = ("-h", "--help")
HEADLESS_FLAGS = HELP_FLAGS + ("--version",)


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    from elmo_engine import cli

    if argv and argv[0] in cli.subcommand_names():
        return cli.main(argv)
    if any(a in HELP_FLAGS for a in argv):      # the app's options and every command, in one
        from elmo_explorer.shell.main import build_parser as app_parser

        return cli.main(argv, app_options=app_parser(add_help=False))
    if argv and argv[0] in HEADLESS_FLAGS:
        return cli.main(argv)
    from elmo_explorer.shell.main import main as gui_main  # Qt is imported only for the GUI

    return gui_main(argv)


if __name__ == "__main__":
    sys.exit(main())
