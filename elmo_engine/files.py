"""Reading files safely: the one regular-file check and a bounded whole-file read.

Every reader of the engine calls :func:`regular_file_problem` (through the error type of its
layer: ``io.datasets.textio.check_regular_file`` raises ``InputError``, the checkpoint loader
``CheckpointError``) *before* it opens a file, so that a FIFO (reading would wait forever), a
device such as ``/dev/zero`` (endless), a socket or a folder is refused, and before anything
else reads the file (a checksum included). :func:`read_bounded` reads a small file (a config,
a training state's JSON, a vocabulary) whole, refusing one larger than its limit without
reading past it. :func:`parse_json_strict` parses JSON as the standard defines it (no ``NaN`` or
``Infinity``), with one ``ValueError`` for every way it can fail.

File names that are not text: :func:`name_problem` says why a name's bytes are not UTF-8 (the
command line and the app refuse such names before any work: results, records and reports name
their files as UTF-8 text), :func:`shown` writes a message naming such a file so that any
stream or dialog shows it as written, and :func:`lone_surrogate` finds the character a JSON
``\\udcff`` escape puts in a string, which no file can hold as UTF-8.
"""
from __future__ import annotations

import json
import os
import stat
import sys
from typing import Optional

#: characters that reorder or hide what a terminal or a dialog shows (bidirectional controls)
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
                          "\u2066\u2067\u2068\u2069")


def lone_surrogate(text: str) -> Optional[int]:
    """The index of the first lone surrogate (U+D800–U+DFFF) in ``text``, or None (found by
    the UTF-8 encoder, which fails on nothing else)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        return e.start
    return None


def not_utf8(data: bytes, start, lines: bool = True, file_start: bool = True) -> str:
    """What the readers of text a user writes say of bytes that are not UTF-8: the byte and
    its place, "not valid UTF-8 (byte 0xE9 at line 2, column 4)" (columns count bytes;
    ``lines=False``: the column alone, for a reader that names the line itself), or that the
    file is UTF-16 when it starts with UTF-16's byte order mark (``file_start``: ``data`` is
    the file's beginning). ``start``: where the decoder stopped, or its
    ``UnicodeDecodeError`` (whose position ``utf-8-sig`` counts after a BOM it dropped)."""
    if isinstance(start, UnicodeDecodeError):
        start = start.start + len(data) - len(start.object)
    if file_start and data[:2] in (b"\xff\xfe", b"\xfe\xff") and start < 2:
        return "is UTF-16 text (it starts with a UTF-16 byte order mark); save it as UTF-8"
    line_start = data.rfind(b"\n", 0, start) + 1
    where = f"column {start - line_start + 1}"
    if lines:
        line = data.count(b"\n", 0, start) + 1
        where = f"line {line}, {where}"
    return f"not valid UTF-8 (byte 0x{data[start]:02X} at {where})"


def utf8_text(data: bytes, bom: bool = False) -> str:
    """``data`` decoded as UTF-8 (``bom``: a leading byte order mark dropped, as editors on
    Windows write it); where it is not UTF-8, a ``ValueError`` saying :func:`not_utf8`, for
    readers whose own message holds the reason (a model config, a training state, WordNet)."""
    try:
        return data.decode("utf-8-sig" if bom else "utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(not_utf8(data, e)) from None


def name_problem(path, what: str = "the file name") -> Optional[str]:
    """Why the bytes of the file name ``path`` (as Python decoded them: a byte that is not
    UTF-8 kept as U+DC80–U+DCFF) are not UTF-8 text, or None when they are. Where Python reads
    names as ASCII (``LC_ALL=POSIX`` with ``PYTHONUTF8=0``) a UTF-8 ``é`` is escaped too: that
    is said as such."""
    text = os.fspath(path)
    if isinstance(text, bytes) or lone_surrogate(text) is None:
        return None
    raw = os.fsencode(text)
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return (f"{what} is not UTF-8: byte 0x{raw[e.start]:02X} at byte {e.start + 1}; rename "
                "it (results, records, indexes and reports name their files as UTF-8 text)")
    return (f"{what} is UTF-8, but Python reads file names as {sys.getfilesystemencoding()} "
            "here: set LANG=C.UTF-8 or PYTHONUTF8=1")


def shown(text: str, one_line: bool = False) -> str:
    """``text`` as a terminal or a dialog should show it: the bytes of a file name that are not
    UTF-8 (kept by Python as lone surrogates) written ``\\xff`` (a stream with a strict error
    handler failed on them, and Qt drops them, naming another file), bidirectional controls
    written ``\\u202e`` (they reorder the line). ``one_line``: control characters (a newline
    in a file name) and line separators too, so that an error line stays one line."""
    def escape(c: str) -> str:
        o = ord(c)
        if 0xdc80 <= o <= 0xdcff:
            return f"\\x{o - 0xdc00:02x}"
        if 0xd800 <= o <= 0xdfff or c in BIDI_CONTROLS:
            return f"\\u{o:04x}"
        if one_line and (o < 0x20 or 0x7f <= o < 0xa0 or c in "\u2028\u2029"):
            return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}"
        return c

    if text.isprintable() and not any(c in BIDI_CONTROLS for c in text):
        return text
    return "".join(escape(c) for c in text)


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
