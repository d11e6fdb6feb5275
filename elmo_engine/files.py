"""Reading files safely: the one regular-file check and a bounded whole-file read.

Every reader of the engine calls :func:`regular_file_problem` (through the error type of its
layer: ``io.datasets.textio.check_regular_file`` raises ``InputError``, the checkpoint loader
``CheckpointError``) *before* it opens a file, so that a FIFO (reading would wait forever), a
device such as ``/dev/zero`` (endless), a socket or a folder is refused, and before anything
else reads the file (a checksum included). :func:`read_bounded` reads a small file (a config,
a training state's JSON, a vocabulary) whole, refusing one larger than its limit without
reading past it. :func:`parse_json_strict` parses JSON as the standard defines it (no ``NaN`` or
``Infinity``), with one ``ValueError`` for every way it can fail.
"""
from __future__ import annotations

import json
import os
import stat
from typing import Optional


def regular_file_problem(path) -> Optional[str]:
    """Why ``path`` is not a readable regular file (links followed), or None when it is."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return f"cannot open: {exc.strerror or exc}"
    if stat.S_ISDIR(st.st_mode):
        return "is a folder, not a file"
    if not stat.S_ISREG(st.st_mode):
        kind = ("a FIFO (named pipe)" if stat.S_ISFIFO(st.st_mode) else
                "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else
                "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
        return f"is {kind}, not a regular file; only files are read"
    return None


def read_bounded(path, max_bytes: int) -> bytes:
    """The bytes of the regular file ``path``, at most ``max_bytes``.

    Raises ``OSError`` for a file that is not regular or cannot be read and ``ValueError`` for
    one larger than ``max_bytes`` (read no further than the limit); callers turn both into
    their own error naming the file.
    """
    problem = regular_file_problem(path)
    if problem:
        raise OSError(problem)
    with open(path, "rb") as fh:
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ValueError(f"larger than {max_bytes:,} bytes")
    return data


def parse_json_strict(data) -> object:
    """JSON text (``str`` or UTF-8 ``bytes``) as Python values, refusing what JSON does not allow
    but Python's reader takes: ``NaN``, ``Infinity`` and ``-Infinity``. Raises ``ValueError``
    (with the reason; nesting too deep for the reader included), which callers turn into their
    own error naming the file."""
    def refuse(name: str) -> object:
        raise ValueError(f"{name} is not a JSON number")

    try:
        return json.loads(data, parse_constant=refuse)
    except RecursionError:
        raise ValueError("nested too deeply") from None
