"""Headless commands over the engine: ``elmo-explorer embed|info|train-lm|probe|contexts|…``.

Argument parsing only: each subcommand is a module here with ``add_parser(subparsers)`` and
``run(args) -> int`` that checks its arguments and calls the engine's domain modules
(:mod:`elmo_engine.model`, :mod:`elmo_engine.embed`, :mod:`elmo_engine.analysis`,
:mod:`elmo_engine.io`, :mod:`elmo_engine.train`). :mod:`.main` dispatches. The app never imports
this package (tests/engine/test_import_contract.py).
"""
from elmo_engine.cli.main import build_parser, main, subcommand_names

__all__ = ["build_parser", "main", "subcommand_names"]
