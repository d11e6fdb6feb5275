"""The ``elmo-explorer`` command: the GUI, or a headless subcommand (``embed``, ``train-lm``, …)."""
from __future__ import annotations

import sys
from typing import List, Optional


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    from elmo_engine import cli

    if argv and (argv[0] in cli.subcommand_names() or argv[0] in ("-h", "--help", "--version")):
        return cli.main(argv)
    from app.main import main as gui_main  # Qt is imported only for the GUI

    return gui_main(argv)


if __name__ == "__main__":
    sys.exit(main())
