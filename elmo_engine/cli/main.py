"""The dispatcher of the headless commands: one parser, one subcommand module per command.

Engine errors become one clear line on stderr, ``elmo-explorer: error: …``, and exit status 1;
any other error (a ``MemoryError`` included) too, with its traceback in a log file
(:mod:`.last_resort`). Usage errors exit with status 2 (:class:`~elmo_engine.cli.parsing.Parser`).
A command that declares ``-o/--out`` for its results (:func:`~elmo_engine.cli.common.
add_results_out`) has its stdout written to that file here.

Answering at once: the subcommand modules import only :mod:`argparse` and the light
:mod:`~elmo_engine.cli.common` at module level (the engine's domain modules, numpy and torch
inside ``run``); a named command builds its own parser only, ``--version`` none; torch's
process settings are applied when torch is first imported
(:func:`~elmo_engine.runtime.configure_on_import`). So ``--version``, ``--help``, a usage error
or an output that exists answer before torch is loaded (tests/engine/test_startup.py,
benchmarks/bench_startup.py).
"""
from __future__ import annotations

import argparse
import importlib
import logging
import sys
from typing import List, Optional, Sequence

from elmo_engine.cli.parsing import error_line
from elmo_engine.errors import CancelledError, ElmoError

# subcommand → module providing add_parser/run
SUBCOMMAND_MODULES = {
    "embed": "elmo_engine.cli.embed",
    "info": "elmo_engine.cli.info",
    "train-lm": "elmo_engine.cli.train_lm",
    "eval-lm": "elmo_engine.cli.eval_lm",
    "lm": "elmo_engine.cli.lm",
    "probe": "elmo_engine.cli.probe",
    "export": "elmo_engine.cli.export",
    "report": "elmo_engine.cli.report",
    "contexts": "elmo_engine.cli.contexts",
    "project": "elmo_engine.cli.project",
    "layers": "elmo_engine.cli.layers",
    "models": "elmo_engine.cli.models",
    "index": "elmo_engine.cli.index",
    "search": "elmo_engine.cli.search",
    "senses": "elmo_engine.cli.senses",
    "wsd-nn": "elmo_engine.cli.wsd_nn",
    "chars": "elmo_engine.cli.chars",
    "units": "elmo_engine.cli.units",
}


def subcommand_names() -> List[str]:
    return list(SUBCOMMAND_MODULES)


def build_parser(commands: Optional[Sequence[str]] = None,
                 app_options: Optional[argparse.ArgumentParser] = None) -> argparse.ArgumentParser:
    """The parser of ``commands`` (default: every subcommand). ``app_options``: a parser
    (``add_help=False``) whose options the help lists too: the desktop app's, given by the
    program's entry point (the engine does not know the app)."""
    from elmo_engine.cli.parsing import Parser, check_option_values

    description = ("ELMo Explorer: with no COMMAND the desktop app starts"
                   + (" (its options below)" if app_options is not None else "")
                   + "; a COMMAND runs headless (elmo-explorer COMMAND --help for its options).")
    parser = Parser(prog="elmo-explorer", description=description,
                    parents=[app_options] if app_options is not None else [])
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in (SUBCOMMAND_MODULES if commands is None else commands):
        importlib.import_module(SUBCOMMAND_MODULES[name]).add_parser(sub)
    check_option_values(parser)               # every numeric option range-checked, by name
    return parser


def commands_to_build(argv: Sequence[str]) -> Optional[List[str]]:
    """The subcommands whose parsers ``argv`` needs: the one it names, none for ``--version``
    alone, else (``--help``, a misspelt command) all of them (None)."""
    if argv and argv[0] in SUBCOMMAND_MODULES:
        return [argv[0]]
    if list(argv) == ["--version"]:
        return []
    return None


def main(argv: Optional[List[str]] = None,
         app_options: Optional[argparse.ArgumentParser] = None) -> int:
    """Run one headless command; ``argv`` excludes the program name. ``app_options``: see
    :func:`build_parser`."""
    from elmo_engine import runtime

    _streams_never_fail_on_a_character()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["chars"]:                # chars WORD… is chars word WORD…
        from elmo_engine.cli.chars import default_action

        argv = default_action(argv)
    parser = build_parser(commands_to_build(argv), app_options)
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    runtime.configure_on_import()
    func = getattr(args, "func", None) or importlib.import_module(
        SUBCOMMAND_MODULES[args.command]).run
    try:
        from elmo_engine.cli.common import refuse_unoffered_precision
        from elmo_engine.cli.outputs import guard_outputs, refuse_missing_inputs

        refuse_unoffered_precision(args)         # fp16 on a CPU: at once, before torch
        refuse_missing_inputs(args)              # a misspelt input: at once, before torch
        guard_outputs(args)                      # an output never replaces an input
        if getattr(args, "_results_out", False):
            from elmo_engine.cli.common import refuse_existing, results_to

            refuse_existing(args.force, args.out)
            with results_to(args.out):
                return int(func(args) or 0)
        return int(func(args) or 0)
    except CancelledError:
        print("elmo-explorer: cancelled; nothing was written", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("elmo-explorer: interrupted; nothing half-written was left behind", file=sys.stderr)
        return 130
    except ElmoError as e:
        print(error_line(e), file=sys.stderr)
        return 1
    except BrokenPipeError:  # `… | head`: the reader has gone; nothing to say, nothing to flush
        _stdout_to_devnull()
        return 141
    except OSError as e:  # an unwritable folder, a vanished file: one line, no traceback
        where = f" ({e.filename})" if getattr(e, "filename", None) else ""
        print(error_line(f"{e.strerror or e}{where}"), file=sys.stderr)
        return 1
    except Exception as e:  # the last resort: one line here, the traceback in the log
        from elmo_engine.cli.last_resort import report_unexpected

        return report_unexpected(e, args.command)


#: the error handler of stdout and stderr (:func:`_streams_never_fail_on_a_character`)
STREAM_ERRORS = "elmo-explorer-stream"


def _original_byte_or_escape(exc: UnicodeError):
    """A character the stream's encoding lacks: a file name's byte that was not UTF-8 (kept by
    Python as U+DC80–U+DCFF) goes out as that byte, as ``surrogateescape`` writes it (so that
    ``$(elmo-explorer models path …)`` names the folder); any other as ``\\u2016``."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    c = exc.object[exc.start]
    if "\udc80" <= c <= "\udcff":
        return bytes([ord(c) - 0xdc00]), exc.start + 1
    return c.encode("ascii", "backslashreplace").decode("ascii"), exc.start + 1


def _streams_never_fail_on_a_character() -> None:
    """stdout and stderr never fail on a character their encoding lacks: under a Latin-1 or
    ASCII locale (or ``PYTHONIOENCODING=ascii``) the commands' own ’ ‖ ≥ —, a word in another
    script or a file name stopped ``--help`` with a traceback and a result after its work
    ("unexpected UnicodeEncodeError"). Such a character is written ``\\u2016``
    (:func:`_original_byte_or_escape`); JSON on such a stream is all-ASCII instead
    (:func:`~elmo_engine.cli.common.print_json`)."""
    import codecs

    try:
        codecs.lookup_error(STREAM_ERRORS)
    except LookupError:
        codecs.register_error(STREAM_ERRORS, _original_byte_or_escape)
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and getattr(stream, "errors", None) in ("strict",
                                                                           "surrogateescape"):
            try:
                reconfigure(errors=STREAM_ERRORS)
            except (ValueError, OSError):              # a closed or detached stream
                pass


def _stdout_to_devnull() -> None:
    """After a broken pipe: point stdout at /dev/null so that the flush at exit stays quiet."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):       # not a real file (tests, IDEs)
        pass


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("elmo-explorer")
    except Exception:
        return "unknown"
