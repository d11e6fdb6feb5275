"""The conventions every subcommand shares, in one place (docs/guide/cli.md):

* typed text is tokenized; ``--pretokenized`` splits on whitespace (:func:`add_pretokenized`,
  :func:`read_text`, over the one reader :func:`elmo_engine.io.datasets.text_input.read_text_input`);
* ``--device auto`` (CUDA when available, else the CPU) everywhere (:func:`add_device`);
* an existing output is refused without ``--force``, naming the file (:func:`add_force`,
  :func:`refuse_existing`), checked before any long work;
* results go to stdout, progress and logs to stderr (:func:`log`);
* blank lines are skipped and counted (:func:`read_text` says so on stderr);
* an absent word is an error (exit 1) with a did-you-mean (:func:`absent_word`).
"""
from __future__ import annotations

import argparse
import difflib
import sys
from collections import Counter
from pathlib import Path
from typing import Iterable, List, Optional, Sequence

from elmo_engine.errors import InputError


# ---- arguments -------------------------------------------------------------------------------
def add_checkpoint(p: argparse.ArgumentParser, help: Optional[str] = None) -> None:
    p.add_argument("--checkpoint", type=Path, default=None,
                   help=help or "checkpoint folder or file (default: the bundled demo model)")


def add_device(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="auto",
                   help="auto (CUDA when available, else the CPU; the default), cpu, cuda or "
                        "cuda:N")


def add_force(p: argparse.ArgumentParser, what: str = "existing output files") -> None:
    p.add_argument("--force", action="store_true", help=f"overwrite {what}")


def add_pretokenized(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pretokenized", action="store_true",
                   help="the text is already tokenized: split lines on whitespace (default: "
                        "tokenize typed text as the app does)")
    # the former opt-in, now the default: still accepted so that old scripts keep working
    p.add_argument("--tokenize", action="store_true", help=argparse.SUPPRESS)


# ---- inputs and outputs ----------------------------------------------------------------------
def log(message: str) -> None:
    """A log line (not a result): stderr."""
    print(message, file=sys.stderr, flush=True)


def refuse_existing(force: bool, *paths: Optional[Path]) -> None:
    """Refuse any of ``paths`` that exists, unless ``force``; one error naming the file."""
    if force:
        return
    for path in paths:
        if path is not None and (Path(path).exists() or Path(path).is_symlink()):
            raise InputError(f"{path} exists; pass --force to overwrite it")


def read_text(path: Path, pretokenized: bool = False, max_tokens: Optional[int] = None,
              unlimited: bool = False):
    """The sentences of a text file (:class:`~elmo_engine.io.datasets.text_input.TextInput`),
    saying on stderr how many blank lines were skipped. ``unlimited``: no file-size limit
    (``embed``, ``export vectors``: a corpus to embed may be big; the others analyse what fits
    in a view)."""
    from elmo_engine.io.datasets.text_input import read_text_input

    kwargs = {"max_bytes": None} if unlimited else {}
    text = read_text_input(path, pretokenized=pretokenized, max_tokens=max_tokens, **kwargs)
    if text.blank:
        log(f"note: {text.blank_note()}")
    return text


def resolve_device(name: Optional[str]):
    from elmo_engine.embed.embedder import pick_device

    return pick_device(name)


def parse_floats(text: Optional[str], option: str) -> Optional[List[float]]:
    """``"0,1,1"`` → ``[0.0, 1.0, 1.0]`` for a comma-separated option; ``None`` stays ``None``."""
    if text is None:
        return None
    try:
        return [float(v) for v in text.replace(",", " ").split()]
    except ValueError:
        raise InputError(f"{option} must be comma-separated numbers, got {text!r}") from None


def checkpoint_or_demo(path: Optional[Path]) -> Path:
    """``--checkpoint`` when given (a path, or a published model's name: ``small`` → its
    downloaded folder, docs/guide/models.md), else the bundled demo model's folder."""
    if path is not None:
        from elmo_engine.io.model_store import resolve_checkpoint_argument

        return resolve_checkpoint_argument(path)
    from elmo_engine.resources import demo_checkpoint_path

    return demo_checkpoint_path()


# ---- words -----------------------------------------------------------------------------------
def suggestions(word: str, vocabulary: Iterable[str], n: int = 3) -> List[str]:
    """Words of ``vocabulary`` the user may have meant: other cases first, then near spellings
    (most frequent first among equals)."""
    counts = Counter(vocabulary)
    if not counts:
        return []
    folded = word.casefold()
    same_case = sorted((w for w in counts if w != word and w.casefold() == folded),
                       key=lambda w: -counts[w])
    by_folded: dict = {}
    for w in sorted(counts, key=lambda w: -counts[w]):
        by_folded.setdefault(w.casefold(), w)         # the most frequent spelling of each
    near = difflib.get_close_matches(folded, list(by_folded), n=n, cutoff=0.75)
    out = list(same_case)
    out += [by_folded[f] for f in near if by_folded[f] not in out and by_folded[f] != word]
    return out[:n]


def absent_word(word: str, tokens: Sequence[Sequence[str]], where: str,
                path: Optional[Path] = None, hint: str = "") -> InputError:
    """The error for a word that does not occur: ``'Bank' does not occur in …; did you mean
    'bank'?`` (exit status 1)."""
    found = suggestions(word, (t for s in tokens for t in s))
    msg = f"'{word}' does not occur in {where}"
    if found:
        msg += "; did you mean " + " or ".join(f"'{w}'" for w in found) + "?"
        if hint and any(w.casefold() == word.casefold() for w in found):
            msg += f" ({hint})"
    return InputError(msg, path=path)
