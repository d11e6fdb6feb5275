"""The conventions every subcommand shares, in one place (docs/guide/cli.md):

* typed text is tokenized; ``--pretokenized`` splits on whitespace (:func:`add_pretokenized`,
  :func:`read_text`, over the one reader
  :func:`elmo_engine.io.datasets.text_input.read_text_input`);
* ``--device auto`` (CUDA when available, else the CPU) everywhere (:func:`add_device`);
* ``--precision fp32`` by default wherever a model runs; bf16 on a GPU or on a CPU with bf16
  units, fp16 on a GPU (:func:`add_precision`, checked before any long work by
  :func:`resolve_precision`);
* an existing output is refused without ``--force``, naming the file (:func:`add_force`,
  :func:`refuse_existing`), checked before any long work;
* results go to stdout, progress and logs to stderr (:func:`log`); ``--json`` is a flag (the
  results as one JSON document, :func:`add_json`); ``-o/--out FILE`` writes the results (or the
  command's primary output) to FILE, ``-`` meaning stdout (:func:`add_results_out`,
  :func:`results_to`, :func:`output_file`);
* the same names for the same thing: ``--checkpoint``, ``--layers {all,top,average,mix}``
  (:data:`LAYER_CHOICES`), ``--mix-weights`` (equal weights by default), ``--device``,
  ``--force``;
* errors: one line ``elmo-explorer: error: …``; exit 1 for bad input (a file, a value), 2 for
  usage (an unknown option, a missing argument) (:class:`~.parsing.Parser`, which also checks
  every option's value while parsing);
* blank lines are skipped and counted (:func:`read_text` says so on stderr);
* an absent word is an error (exit 1) with a did-you-mean (:func:`absent_word`).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Iterator, List, Optional, Sequence

from elmo_engine import errors, runtime
from elmo_engine.errors import InputError


# ---- arguments -------------------------------------------------------------------------------
def add_checkpoint(p: argparse.ArgumentParser, help: Optional[str] = None) -> None:
    p.add_argument("--checkpoint", type=Path, default=None,
                   help=help or "checkpoint folder or file (default: the bundled demo model)")


def add_device(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="auto",
                   help="auto (CUDA when available, else the CPU; the default), cpu, cuda or "
                        "cuda:N")


def add_precision(p: argparse.ArgumentParser, choices: Sequence[str] = ("fp32", "fp16", "bf16")
                  ) -> None:
    p.add_argument("--precision", choices=list(choices), default="fp32",
                   help="fp32 (the default; conformant), or bf16 on a GPU or on a CPU with bf16 "
                        "units (AMX or AVX512_BF16; see `elmo-explorer info`)"
                        + (", fp16 on a GPU" if "fp16" in choices else "")
                        + "; measured fidelity in docs/performance.md")


def add_force(p: argparse.ArgumentParser, what: str = "existing output files") -> None:
    if "--force" not in p._option_string_actions:
        p.add_argument("--force", action="store_true", help=f"overwrite {what}")


#: ``--layers``: the same values in every command that chooses among the biLM's layers
LAYER_CHOICES = ("all", "top", "average", "mix")
LAYERS_HELP = ("all: every layer 0..L kept separately (the default); top: layer L; average: "
               "their plain mean; mix: the scalar mix given by --mix-weights")
MIX_WEIGHTS_HELP = ("scalar-mix weights, one per layer 0..L, comma-separated, normalised to sum "
                    "1 (default: equal weights)")


def add_layers(p: argparse.ArgumentParser, default: str = "all") -> None:
    p.add_argument("--layers", choices=list(LAYER_CHOICES), default=default, help=LAYERS_HELP)


def add_mix_weights(p: argparse.ArgumentParser, extra: str = "") -> None:
    p.add_argument("--mix-weights", default=None, metavar="W0,W1,…",
                   help=MIX_WEIGHTS_HELP + extra)


def add_json(p: argparse.ArgumentParser) -> None:
    """``--json``: a flag, the results as one JSON document (stdout, or ``--out``)."""
    p.add_argument("--json", action="store_true",
                   help="print the results as one JSON document (on stdout, or into --out)")


def add_results_out(p: argparse.ArgumentParser) -> None:
    """``-o/--out FILE``: the results (text, or JSON with ``--json``) into FILE instead of
    stdout, atomically; ``-`` is stdout. Adds ``--force`` if the command has none; the
    dispatcher (:func:`elmo_engine.cli.main.main`) does the writing (:func:`results_to`)."""
    p.add_argument("-o", "--out", type=Path, default=None, metavar="FILE",
                   help="write the results to FILE instead of stdout ('-': stdout)")
    add_force(p, "--out FILE if it exists")
    p.set_defaults(_results_out=True)


def add_out(p: argparse.ArgumentParser, help: str, dest: str = "out", required: bool = True,
            metavar: str = "FILE") -> None:
    """``-o/--out``: the command's primary output (a file, or a folder where ``help`` says so)."""
    p.add_argument("-o", "--out", dest=dest, type=Path, required=required, metavar=metavar,
                   help=help)


def is_stdout(path) -> bool:
    """Whether an output option names stdout (``-``)."""
    return path is not None and str(path) == "-"


def refuse_stdout(path, what: str) -> None:
    """A folder output cannot be stdout: one line saying so."""
    if is_stdout(path):
        raise InputError(f"--out -: {what} is a folder and cannot be written to stdout; "
                         "name a folder")


@contextlib.contextmanager
def results_to(out: Optional[Path]) -> Iterator[None]:
    """Run the body with its stdout (the results) going to ``out`` (written atomically once the
    body succeeded; nothing on failure), or to stdout when ``out`` is None or ``-``."""
    if out is None or is_stdout(out):
        yield
        return
    from elmo_engine.atomic import atomic_write_text

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        yield
    atomic_write_text(out, buf.getvalue())
    log(f"wrote {out}")


@contextlib.contextmanager
def output_file(out: Path, suffix: str = "") -> Iterator[Path]:
    """The path to write a primary output file to: ``out`` itself, or for ``-`` a temporary file
    whose bytes are copied to stdout once the body succeeded."""
    if not is_stdout(out):
        yield out
        return
    folder = Path(tempfile.mkdtemp(prefix="elmo-explorer-stdout-"))
    try:
        path = folder / f"stdout{suffix}"
        yield path
        sys.stdout.flush()
        target = getattr(sys.stdout, "buffer", None)
        with open(path, "rb") as fh:
            if target is not None:
                shutil.copyfileobj(fh, target)
                target.flush()
            else:                                    # a text-only stream (tests)
                sys.stdout.write(fh.read().decode("utf-8", "replace"))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def is_utf8(stream) -> bool:
    """Whether ``stream`` (a text stream) encodes as UTF-8."""
    encoding = getattr(stream, "encoding", None) or ""
    return encoding.lower().replace("-", "").replace("_", "") == "utf8"


def print_json(doc) -> None:
    """The results as one JSON document on stdout: UTF-8 where stdout is, else all-ASCII
    (``\\u00e9``), which any encoding carries and every JSON reader decodes alike; all-ASCII
    too when a string holds a file name's byte that is not UTF-8 (``\\udcff``, valid JSON),
    which would otherwise go out as a raw byte."""
    from elmo_engine.files import lone_surrogate

    ascii_only = not is_utf8(sys.stdout)
    text = json.dumps(doc, indent=2, ensure_ascii=ascii_only)
    if not ascii_only and lone_surrogate(text) is not None:
        text = json.dumps(doc, indent=2, ensure_ascii=True)
    print(text)


def add_split_sentences(p: argparse.ArgumentParser, default: bool, what: str = "the input"
                        ) -> None:
    """``--split-sentences`` / ``--no-split-sentences``: the one paragraph-splitting rule of every
    command that reads a corpus (``index``, ``embed``, ``export vectors``, ``contexts
    --reference``): each line cut into sentences by the trainer's splitter
    (:func:`elmo_engine.io.datasets.corpus_text.split_sentences`: after . ! ? and closing quotes,
    before a capital, a digit or an opening quote). ``default``: the command's (a corpus is split,
    a file whose output is keyed by line is not)."""
    p.add_argument("--split-sentences", dest="split_sentences",
                   action=argparse.BooleanOptionalAction, default=default,
                   help=f"split each line of {what} into sentences with the trainer's splitter "
                        "(after . ! ? before a capital); --no-split-sentences keeps one sentence "
                        f"per line (default: {'split' if default else 'one per line'})")


class _TokenizeAction(argparse.Action):
    """``--tokenize [NAME]`` of the commands that keep ``args.pretokenized``: the same option
    and values as ``train-lm``'s (:func:`add_tokenization`); a bare ``--tokenize``, the former
    opt-in (now the default), still means ``tokenize``."""

    def __call__(self, parser, namespace, values, option_string=None):
        from elmo_engine.model.tokenize import Tokenization

        namespace.pretokenized = values is Tokenization.WHITESPACE


def add_pretokenized(p: argparse.ArgumentParser) -> None:
    """``--pretokenized`` / ``--tokenize NAME`` (``args.pretokenized``: a bool), read as
    :func:`add_tokenization` reads them, so that one option means one thing in every command."""
    from elmo_engine.cli.parsing import tokenization_type
    from elmo_engine.model.tokenize import Tokenization

    p.add_argument("--pretokenized", action="store_true",
                   help="the text is already tokenized: split lines on whitespace (default: "
                        "tokenize typed text as the app does)")
    p.add_argument("--tokenize", action=_TokenizeAction, nargs="?", const=Tokenization.TYPED,
                   type=tokenization_type, default=argparse.SUPPRESS,
                   metavar="{tokenize,whitespace}",
                   help="tokenize: split typed text as the app does (the default); whitespace: "
                        "the same as --pretokenized")


def add_tokenization(p: argparse.ArgumentParser) -> None:
    """``--pretokenized`` / ``--tokenize NAME`` of the commands that read a corpus as the trainer
    does (``train-lm``, ``eval-lm``); ``args.tokenize`` is a ``Tokenization``."""
    from elmo_engine.cli.parsing import tokenization_type
    from elmo_engine.model.tokenize import Tokenization

    p.add_argument("--tokenize", default=Tokenization.TYPED, type=tokenization_type,
                   nargs="?", const=Tokenization.TYPED, metavar="{tokenize,whitespace}",
                   help="tokenize: split typed text as the app does (default); whitespace: the "
                        "text is already tokenized ('regex', the older name of tokenize, is "
                        "still read)")
    p.add_argument("--pretokenized", action="store_const", dest="tokenize",
                   const=Tokenization.WHITESPACE,
                   help="the text is already tokenized (the same as --tokenize whitespace)")


# ---- inputs and outputs ----------------------------------------------------------------------
def log(message: str) -> None:
    """A log line (not a result): stderr, a file name's bytes that are not UTF-8 as ``\\xff``."""
    from elmo_engine.files import shown

    print(shown(message), file=sys.stderr, flush=True)


def refuse_existing(force: bool, *paths: Optional[Path], folders: bool = False) -> None:
    """Refuse any of ``paths`` that exists, unless ``force``; one error naming the file. An
    output file that exists as something else (a folder, a FIFO, a device) is refused even
    with ``force``, at once rather than after the work (``folders``: the paths are folders)."""
    for path in paths:
        if path is None or is_stdout(path):
            continue
        if not folders and Path(path).exists() and not Path(path).is_file():
            from elmo_engine.files import regular_file_problem

            problem = regular_file_problem(path) or "is not a regular file"
            raise InputError(f"{problem.replace('; only files are read', '')}: an output is "
                             "written as a regular file; give a file name", path=path)
        if not force and (Path(path).exists() or Path(path).is_symlink()):
            raise InputError(f"{path} exists; pass --force to overwrite it")


def check_writable_folder(path: Path) -> None:
    """Before the work (the output guard, for every output of every command): the folder an
    output is written in takes new files — an existing folder output itself (an index resumed
    in place, a training resumed), else the nearest existing folder above the path. A read-only
    file system or a folder of another user's was found only after the work.

    access(2) answers first; where it says yes, a file is made and removed
    (:func:`_takes_new_files`), because access(2) can say yes where a write fails: a file system
    that refuses new files to root (``/sys``), an NFS export that maps root to nobody."""
    import os

    folder = Path(os.path.abspath(path))
    if not folder.is_dir():
        folder = folder.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if folder.is_dir() and not (os.access(folder, os.W_OK | os.X_OK)
                                and _takes_new_files(folder)):
        raise InputError(f"cannot be written: {folder} takes no new files (read-only or "
                         "another user's); nothing was done", path=path)


def _takes_new_files(folder: Path) -> bool:
    """Whether a new file can be made in ``folder``: one is made (exclusively, a name of its
    own) and removed at once."""
    import os
    import tempfile

    try:
        fd, name = tempfile.mkstemp(prefix=".elmo-write-check-", dir=folder)
    except OSError:
        return False
    os.close(fd)
    try:
        os.unlink(name)
    except OSError:             # a folder that takes files but lets none go (append-only):
        return False            # the output's rename into place would fail there too
    return True




def read_text(path: Path, pretokenized: bool = False, max_tokens: Optional[int] = None,
              unlimited: bool = False):
    """The sentences of a text file (:class:`~elmo_engine.io.datasets.text_input.TextInput`),
    saying on stderr how many blank lines were skipped. Every command reads at most
    ``MAX_FILE_BYTES`` (16 MiB, ``io.datasets.sentences``) of text, a gzip file by its
    decompressed size, read as a stream (a 100 kB gzip bomb stops at the limit); ``unlimited``
    is kept for the callers that passed it (``embed``, ``export vectors``: issue 25 gave them
    the limit too, their token lists are held while the vectors are written)."""
    from elmo_engine.io.datasets.text_input import read_text_input

    text = read_text_input(path, pretokenized=pretokenized, max_tokens=max_tokens)
    if text.blank:
        log(f"note: {text.blank_note()}")
    return text


def resolve_device(name: Optional[str]):
    from elmo_engine.embed.device import pick_device

    return pick_device(name)


def refuse_unoffered_precision(args) -> None:
    """Refuse, before torch loads, a ``--precision`` this machine certainly cannot run: where the
    run is certainly on the CPU (``--device cpu``, or no GPU possible,
    :func:`~elmo_engine.runtime.gpu_possible`), fp16, and bf16 when the CPU's flags show no
    bf16 units. Everything else is decided with torch (:func:`resolve_precision`), whose checks
    are never looser than the flags'. ``index --merge`` computes nothing: not checked."""
    precision = getattr(args, "precision", None)
    if precision not in ("fp16", "bf16") or getattr(args, "merge", False):
        return
    device = getattr(args, "device", None)
    if device not in (None, "auto", "cpu") or (device != "cpu" and runtime.gpu_possible()):
        return
    runtime.check_cpu_precision(precision, runtime.cpu_bf16_from_flags)


def resolve_precision(precision: str, device) -> str:
    """``precision`` if it is offered on ``device`` (a torch.device), else one clear line
    (:class:`InputError`): bf16 on the CPU needs bf16 units, fp16 a GPU."""
    if device.type != "cuda":
        runtime.check_cpu_precision(precision)
    return precision


def parse_floats(text: Optional[str], option: str) -> Optional[List[float]]:
    """``"0,1,1"`` → ``[0.0, 1.0, 1.0]`` for a list option (commas, semicolons or spaces, as
    the app's fields take them); ``None`` stays ``None``."""
    if text is None:
        return None
    try:
        return [float(v) for v in text.replace(",", " ").replace(";", " ").split()]
    except ValueError:
        raise InputError(f"{option} must be comma-separated numbers, got {text!r}") from None


def mix_weights(text: Optional[str], layers: str, n_layers: int) -> Optional[tuple]:
    """``--mix-weights`` for ``--layers mix``: the weights given, else equal ones (the default
    everywhere); given with another ``--layers``, an error."""
    if layers != "mix":
        if text is not None:
            raise InputError("--mix-weights only applies with --layers mix")
        return None
    weights = parse_floats(text, "--mix-weights")
    return tuple(weights) if weights else (1.0,) * n_layers


def checkpoint_or_demo(path: Optional[Path]) -> Path:
    """``--checkpoint`` when given (a path, or a published model's name: ``small`` → its
    downloaded folder, docs/guide/models.md), else the bundled demo model's folder."""
    if path is not None:
        from elmo_engine.io.model_store import resolve_checkpoint_argument

        resolved = resolve_checkpoint_argument(path)
        assert resolved is not None                  # None only for no argument
        return resolved
    from elmo_engine.resources import demo_checkpoint_path

    return demo_checkpoint_path()


def checkpoint_options(path: Optional[Path]):
    """The :class:`~elmo_engine.model.options.BiLMOptions` of ``--checkpoint`` (or of the demo
    model), read from its options file alone: a command checks a layer or a unit against the
    model's sizes before it imports torch and loads the weights."""
    from elmo_engine.model.header import resolve_and_read_options

    return resolve_and_read_options(checkpoint_or_demo(path))[3]


# ---- words -----------------------------------------------------------------------------------
# the words the user may have meant, and the error of a word that does not occur: the engine's
# (the app's views say it the same way)
suggestions, absent_word = errors.suggestions, errors.absent_word


class StderrProgress:
    """Progress on stderr, driven by TaskState reports: a tqdm bar per phase on a terminal, a
    line per phase otherwise (``layers``, ``contexts``)."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.bar, self.phase = None, None

    def __call__(self, done: int, total: int, message: str) -> None:
        phase = message.split("(")[0].strip() or "working"
        if phase != self.phase:
            self.close()
            self.phase = phase
            if self.tty:
                from tqdm import tqdm

                self.bar = tqdm(total=total, desc=phase, file=self.stream, leave=False,
                                dynamic_ncols=True)
            else:
                print(f"{phase} …", file=self.stream, flush=True)
        if self.bar is not None:
            self.bar.total = total
            self.bar.n = done
            self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
