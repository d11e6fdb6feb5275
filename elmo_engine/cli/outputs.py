"""Outputs never overwrite inputs: one check of every command's paths before it runs.

The dispatcher calls :func:`guard_outputs` with the parsed arguments. Options that name
something to write (``OUTPUT``, ``OUTDIR``, ``--out``, ``--json FILE`` …) are compared with every
other path argument and with the files of the checkpoint the command will load (the bundled
model's when no ``--checkpoint`` is given), after resolving symbolic links and recognising hard
links: an output that *is* an input, or a folder that holds one (a report folder is replaced as
a whole), is refused before anything is read or written.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, List, Tuple

from elmo_engine.errors import InputError

#: argparse ``dest`` names of options that are written, per command (everything else is read)
OUTPUT_DESTS = {"output", "outdir", "out", "matrices", "neighbours_csv", "vectors", "json",
                "words_csv", "csv", "tensorboard"}


def _real(p) -> str:
    return os.path.realpath(os.path.expanduser(str(p)))


def same_file(a, b) -> bool:
    """Whether two paths name the same file (links resolved, hard links recognised)."""
    try:
        if os.path.samefile(a, b):
            return True
    except OSError:
        pass
    return _real(a) == _real(b)


def _inside(inner, folder) -> bool:
    f = _real(folder)
    return _real(inner).startswith(f.rstrip(os.sep) + os.sep)


def _checkpoint_files(args) -> List[Path]:
    if not hasattr(args, "checkpoint"):
        return []
    from elmo_engine.cli.common import checkpoint_or_demo
    from elmo_engine.model.checkpoint import resolve_checkpoint

    try:
        _fmt, opts, weights = resolve_checkpoint(checkpoint_or_demo(args.checkpoint))
    except Exception:               # the command itself reports a bad checkpoint
        return []
    return [opts, weights]


def _split(args) -> Tuple[List[Tuple[str, Path]], List[Path]]:
    outputs, inputs = [], []
    for dest, value in vars(args).items():
        if isinstance(value, Path):
            (outputs if dest in OUTPUT_DESTS else inputs).append((dest, value))
    return [(d, v) for d, v in outputs], [v for _d, v in inputs]


def guard_outputs(args) -> None:
    """Raise :class:`InputError` naming the output when writing it would destroy an input."""
    outputs, inputs = _split(args)
    if not outputs:
        return
    inputs = [p for p in inputs if os.path.lexists(p)] + _checkpoint_files(args)
    seen: List[Tuple[str, Path]] = []
    for dest, out in outputs:
        for inp in _existing(inputs):
            if same_file(out, inp):
                raise InputError(f"is also an input ({inp}); an output never replaces an input, "
                                 "choose another name", path=out)
            if os.path.isdir(out) and _inside(inp, out):
                raise InputError(f"holds an input ({inp}); writing here could replace it, choose "
                                 "another folder", path=out)
        for other_dest, other in seen:
            if same_file(out, other):
                raise InputError(f"is given for two outputs ({_flag(other_dest)} and "
                                 f"{_flag(dest)})", path=out)
        seen.append((dest, out))


def _existing(paths: Iterable[Path]) -> List[Path]:
    return [p for p in paths if os.path.exists(p)]


def _flag(dest: str) -> str:
    return dest.upper() if dest in ("output", "outdir") else "--" + dest.replace("_", "-")
