"""The command line's parser and the values of its options, checked while parsing: every
numeric option of every command has a range (:data:`NUMERIC_LIMITS`, given to each option by
:func:`check_option_values`), ``--device`` a pattern, and :class:`Parser` turns every error into
one line (docs/guide/cli.md, "option values checked while parsing").
"""
from __future__ import annotations

import argparse
import math
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from elmo_engine.files import lone_surrogate, name_problem, shown

if TYPE_CHECKING:
    from elmo_engine.model.tokenize import Tokenization

#: the range of every numeric option, by argparse ``dest`` (shared by all commands: a new
#: command's ``--threads`` or ``--batch-size`` is checked the same way). ``(low, high,
#: low_open)``: ``low`` excluded when ``low_open``; None: unbounded. Every numeric option of
#: every command is listed (``tests/engine/test_user_files_and_input_bounds.py`` walks the parser).
NUMERIC_LIMITS = {
    "threads": (1, 1024, False), "batch_size": (1, 1 << 20, False),
    "epochs": (1, 10 ** 6, False), "max_steps": (1, None, False),
    "patience": (1, 10 ** 6, False), "seeds": (1, 1000, False),
    "mix_min_epochs": (1, 10 ** 6, False), "log_every": (1, None, False),
    "checkpoint_every": (1, None, False), "eval_tokens": (1, None, False),
    "unroll": (1, 1 << 16, False), "negatives": (1, 1 << 24, False),
    "vocab_size": (1, 1 << 24, False), "min_count": (1, None, False),
    "max_sentences": (1, None, False), "mdl_max_sentences": (2, None, False),
    "max_tokens": (1, None, False),
    "baseline_samples": (2, 10 ** 7, False), "cka_tokens": (4, 10 ** 7, False),
    "hub_k": (1, 1000, False), "hub_tokens": (3, 100_000, False),           # layers: hubness
    "hidden": (0, 1 << 16, False), "neighbours": (0, 10 ** 6, False),
    "max_points": (2, 10 ** 7, False), "n_neighbors": (2, 10 ** 4, False),
    "faithfulness_k": (1, 1000, False), "faithfulness_points": (5, 100_000, False),   # project
    "lr": (0, None, True), "clip_norm": (0, None, True), "max_minutes": (0, None, True),
    "checkpoint_minutes": (0, None, True), "eval_minutes": (0, None, True),
    "cooldown_minutes": (0, None, True), "min_dist": (0, None, False),
    "min_delta": (0, None, False), "dropout": (0, 1, False), "mix_gamma": (None, None, False),
    # issue 38: every numeric option of every command is here (a test walks the parser)
    "seed": (0, 2 ** 32 - 1, False),                  # what numpy and torch accept
    "umap_seed": (-1, 2 ** 32 - 1, False),            # project --seed: -1 is unseeded
    "width_in": (1.0, 40.0, False), "dpi": (10, 1200, False),    # as FigureStyle checks
    "shard_size": (1, 10 ** 6, False), "token_budget": (1, 1 << 16, False),
    "ann_m": (4, 256, False), "ann_threads": (1, 256, False),
    "k": (1, 10 ** 4, False), "width": (1, 1000, False), "layer": (0, 64, False),
    "occurrence": (1, 10 ** 6, False),
    "k_max": (2, 32, False), "max_occurrences": (4, 10 ** 4, False), "lemmas": (1, 10 ** 4, False),
    "compared_occurrences": (2, 10 ** 4, False),      # contexts: n × n matrices per layer
    "max_train_sentences": (1, None, False),
    "top_k": (1, 1000, False), "reach_curve": (1, 399, False),   # offsets in a reach sentence
    # the characters commands (issue 41)
    "filters": (1, 1 << 20, False), "top": (1, 1 << 20, False), "per_type": (1, 1000, False),
    "filter_width": (1, 64, False),
    # the units commands (issue 40)
    "max_mib": (1, 1 << 20, False), "show": (1, 10 ** 6, False), "unit": (0, 1 << 20, False),
    "threshold": (-1e6, 1e6, False),                  # units pattern: a state's value
    "probe_layer": (0, 64, False),
    # project --aligned (issue 42)
    "knn": (1, 1000, False), "knn_top": (1, 10 ** 6, False), "steps": (1, 200, False),
    "fps": (0.5, 60.0, False),
}
#: the options above that are deliberately unbounded above (None), kept short: a count of items
#: read from a file (bounded by the file's own limit) or of steps and minutes the user waits for
UNBOUNDED_OK = {"max_steps", "log_every", "checkpoint_every", "eval_tokens", "min_count",
                "max_sentences", "mdl_max_sentences", "max_tokens", "max_train_sentences", "lr",
                "clip_norm", "max_minutes", "checkpoint_minutes", "eval_minutes",
                "cooldown_minutes", "min_dist", "min_delta", "mix_gamma"}
_DEVICE = re.compile(r"auto|cpu|cuda(:\d{1,3})?|mps")


def number_type(kind, option: str, limits=(None, None, False)):
    """An argparse ``type`` that reads ``kind`` (int or float) and checks its range: the
    message names the option (argparse adds ``argument --threads:``)."""
    low, high, low_open = limits
    word = "an integer" if kind is int else "a number"

    def parse(text: str):
        try:
            value = kind(text)
        except (TypeError, ValueError):
            raise argparse.ArgumentTypeError(f"must be {word}, got {text!r}") from None
        if kind is float and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
        if low is not None and (value < low or (low_open and value == low)):
            raise argparse.ArgumentTypeError(
                f"must be {'more than' if low_open else 'at least'} {low}, got {text}")
        if high is not None and (value > high or (option == "dropout" and value == high)):
            raise argparse.ArgumentTypeError(
                f"must be {'less than' if option == 'dropout' else 'at most'} {high}, got {text}")
        return value

    parse.__name__ = f"{kind.__name__}"
    return parse


def device_type(text: str) -> str:
    """``--device``: auto, cpu, cuda, cuda:N or mps (checked while parsing)."""
    if not _DEVICE.fullmatch(text):
        raise argparse.ArgumentTypeError(f"must be auto, cpu, cuda, cuda:N or mps, got {text!r}")
    return text


def path_text(text: str) -> str:
    """The ``type`` of an option that names a file or folder but is kept as a string
    (``train-lm``'s corpus, ``--dev`` and ``--out``), as :func:`path_type`; marks the option as
    a path, so that :func:`check_option_values` does not give it :func:`text_type`."""
    problem = name_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text


def path_type(text: str) -> Path:
    """The ``type`` of every option that names a file or folder (``check_option_values`` gives it
    to every ``type=Path`` option): a name whose bytes are not UTF-8 is refused while parsing,
    before any work. Such a name could be read and written, but not written into the results,
    the index manifests, the training records and the reports that name their inputs, which
    failed after the work (a fifth attack pass)."""
    return Path(path_text(text))


path_type.__name__ = "Path"


def text_type(text: str) -> str:
    """The ``type`` of every option that takes words rather than a number or a path (a word, a
    sentence, a list of layers): refused in one line when the shell gave bytes that are not
    UTF-8, which Python keeps as lone surrogates (U+DC80–U+DCFF) and the character encoder
    would drop without a word (a sentence with ``caf\\xe9`` embedded as ``caf``). UTF-8 bytes
    that Python read as ASCII (UTF-8 mode off under the POSIX locale) are decoded as UTF-8."""
    if lone_surrogate(text) is None:
        return text
    raw = os.fsencode(text)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise argparse.ArgumentTypeError(
            f"is not UTF-8 text: byte 0x{raw[e.start]:02X} at byte {e.start + 1} (is the "
            "terminal's encoding UTF-8? check LANG or LC_ALL)") from None


def tokenization_type(text: str) -> "Tokenization":
    """``--tokenize``: tokenize (typed text) or whitespace; ``regex``, the older name of
    tokenize, is still read (:class:`~elmo_engine.model.tokenize.Tokenization`)."""
    from elmo_engine.model.tokenize import Tokenization

    try:
        return Tokenization.parse(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be tokenize or whitespace, got {text!r}") from None


def check_option_values(parser: argparse.ArgumentParser) -> None:
    """Give every numeric option of ``parser`` and its subcommands a range-checked type
    (:data:`NUMERIC_LIMITS`), ``--device`` its check and every other option that takes text
    (not a path, not a choice) :func:`text_type`, so that a bad value is one line naming the
    option before anything runs."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in set(action.choices.values()):
                check_option_values(sub)
            continue
        if action.dest == "device" and action.type is None:
            action.type = device_type
        elif action.type in (int, float):
            action.type = number_type(action.type, action.dest,
                                      NUMERIC_LIMITS.get(action.dest, (None, None, False)))
        elif action.type is None and action.nargs != 0 and action.choices is None:
            action.type = text_type
        elif action.type is Path:
            action.type = path_type


PROGRAM = "elmo-explorer"


def error_line(message) -> str:
    """The one line of every error of the command line: ``elmo-explorer: error: …``."""
    return f"{PROGRAM}: error: {shown(str(message), one_line=True)}"


#: the values of ``--tokenize`` (``regex``: the older name of ``tokenize``)
TOKENIZE_VALUES = ("tokenize", "whitespace", "regex")


def _bare_tokenize(args):
    """``--tokenize`` followed by what cannot be a misspelt value (a file name: not lower-case
    letters alone) is the bare flag of old scripts (``embed --tokenize in.txt -o x``): written
    ``--tokenize=tokenize``, so that its optional value does not take the input file's name.
    ``--tokenize spaces`` stays a bad value, said as such."""
    if args is None:
        return None
    args = list(args)
    return [("--tokenize=tokenize" if a == "--tokenize" and i + 1 < len(args)
             and args[i + 1] not in TOKENIZE_VALUES
             and not re.fullmatch(r"[a-z]+", args[i + 1]) else a)
            for i, a in enumerate(args)]


#: argparse's message for an option whose value is missing, or starts with "-"
_NO_VALUE = re.compile(r"^argument (\S+): expected one argument$")


class Parser(argparse.ArgumentParser):
    """The CLI's parser: every error is one line with the program's prefix, ``elmo-explorer:
    error: …``. A usage error (an unknown option or command, a missing argument: argparse's
    own) exits with status 2; a bad value (out of its range, not a number, not among the
    choices) is bad input, status 1, as the engine's errors."""

    def error(self, message: str):
        flags = _NO_VALUE.match(message)            # "--span -1:2": argparse saw an option
        longs = [f for f in flags.group(1).split("/") if f.startswith("--")] if flags else []
        if longs:
            message += f" (if the value starts with '-', write {longs[-1]}=VALUE)"
        self.exit(2, error_line(f"{message} (see {self.prog} --help)") + "\n")

    def parse_known_args(self, args=None, namespace=None):
        return super().parse_known_args(_bare_tokenize(args), namespace)

    def _bad_value(self, action, error: argparse.ArgumentError):
        if isinstance(action, argparse._SubParsersAction):     # an unknown command: usage
            self.error(str(error))
        self.exit(1, error_line(f"{error} (see {self.prog} --help)") + "\n")

    def _get_value(self, action, arg_string):
        try:
            return super()._get_value(action, arg_string)
        except argparse.ArgumentError as e:
            self._bad_value(action, e)

    def _check_value(self, action, value):
        try:
            return super()._check_value(action, value)
        except argparse.ArgumentError as e:
            self._bad_value(action, e)


__all__ = ["NUMERIC_LIMITS", "PROGRAM", "Parser", "UNBOUNDED_OK", "check_option_values",
           "device_type", "error_line", "number_type", "path_text", "path_type", "text_type"]
