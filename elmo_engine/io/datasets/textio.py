"""Opening data files: plain or gzip (told apart by magic bytes), decoded as UTF-8 line by line.

Every failure — a missing file, a corrupt or truncated gzip stream, undecodable bytes, a line
longer than the limit — becomes an :class:`~elmo_engine.errors.InputError` naming the file and,
where there is one, the 1-based line. Lines are read with a length cap, so a file holding one
10 MB "line" (or a gzip bomb) never grows memory without bound.
"""
from __future__ import annotations

import gzip
import os
import zlib
from pathlib import Path
from typing import BinaryIO, Iterator, Optional, Tuple, Union

from elmo_engine.errors import InputError

PathLike = Union[str, "os.PathLike[str]"]

GZIP_MAGIC = b"\x1f\x8b"
#: default cap on one line, in bytes (a CoNLL-U or TSV line is a few hundred bytes at most)
MAX_LINE_BYTES = 1 << 20
#: errors a broken gzip stream or a failing disk can raise while reading
_READ_ERRORS = (OSError, EOFError, zlib.error, gzip.BadGzipFile)


def check_regular_file(path: PathLike) -> None:
    """Refuse anything but a regular file (after following links) before it is opened: a
    folder, a FIFO (reading would wait forever), a device such as ``/dev/zero`` (endless) or a
    socket. Raises :class:`InputError` naming the path (the one check:
    :func:`elmo_engine.files.regular_file_problem`)."""
    from elmo_engine.files import regular_file_problem

    problem = regular_file_problem(path)
    if problem:
        raise InputError(problem, path=path)


def line_not_utf8(data: bytes, exc: UnicodeDecodeError, path, line: int) -> InputError:
    """The error of a file's ``line`` (1-based) whose bytes ``data`` are not UTF-8, for the
    readers that read a line at a time: the byte and its column, naming the line — or, on the
    first line, that the file is UTF-16 (:func:`elmo_engine.files.not_utf8`), naming none."""
    from elmo_engine.files import not_utf8

    message = not_utf8(data, exc.start, lines=False, file_start=line == 1)
    return InputError(message, path=path,
                      line=None if message.startswith("is UTF-16") else line)


def is_gzip(path: PathLike) -> bool:
    """Whether the file starts with the gzip magic bytes (whatever its name says)."""
    check_regular_file(path)
    try:
        with open(path, "rb") as fh:
            return fh.read(2) == GZIP_MAGIC
    except OSError as exc:
        raise InputError(f"cannot open: {exc.strerror or exc}", path=path) from None


def open_binary(path: PathLike) -> BinaryIO:
    """Open ``path`` for reading bytes, decompressing it when it is gzip.

    Raises
    ------
    InputError
        If the file cannot be opened (missing, a folder, no permission).
    """
    p = Path(path)
    gz = is_gzip(p)                      # refuses folders, FIFOs and devices first
    try:
        if gz:  # GzipFile opened by name owns its file and closes it
            return gzip.GzipFile(filename=p, mode="rb")  # type: ignore[return-value]
        return open(p, "rb")
    except OSError as exc:
        raise InputError(f"cannot open: {exc.strerror or exc}", path=p) from None


class TextLines:
    """Iterate over the UTF-8 lines of a plain or gzip file, with line numbers.

    Use as a context manager; iterating yields ``str`` lines without their line ending
    (``\\n`` or ``\\r\\n``); a UTF-8 byte-order mark at the start is dropped. ``lineno`` is the
    1-based number of the line last yielded.

    Parameters
    ----------
    path : the file
    max_line_bytes : a longer line raises InputError
    max_bytes : if given, reading more than this many (decompressed) bytes raises InputError
    """

    def __init__(self, path: PathLike, max_line_bytes: int = MAX_LINE_BYTES,
                 max_bytes: Optional[int] = None) -> None:
        self.path = Path(path)
        self.max_line_bytes = int(max_line_bytes)
        self.max_bytes = max_bytes
        self.lineno = 0
        self._read = 0
        self._fh: Optional[BinaryIO] = open_binary(self.path)

    def __enter__(self) -> "TextLines":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Close the underlying file (and the gzip stream over it)."""
        fh, self._fh = self._fh, None
        if fh is not None:
            fh.close()

    def error(self, message: str, line: Optional[int] = None) -> InputError:
        """An InputError at ``line`` (default: the current line) of this file."""
        return InputError(message, path=self.path, line=self.lineno if line is None else line)

    def _next_bytes(self) -> bytes:
        assert self._fh is not None
        try:
            data = self._fh.readline(self.max_line_bytes + 1)
        except _READ_ERRORS as exc:
            raise InputError(f"cannot read (corrupt or truncated compressed data?): {exc}",
                             path=self.path, line=self.lineno + 1) from None
        if len(data) > self.max_line_bytes and not data.endswith(b"\n"):
            raise InputError(f"line longer than {self.max_line_bytes} bytes",
                             path=self.path, line=self.lineno + 1)
        self._read += len(data)
        if self.max_bytes is not None and self._read > self.max_bytes:
            raise InputError(f"file larger than the limit of {self.max_bytes} bytes",
                             path=self.path, line=self.lineno + 1)
        return data

    def __iter__(self) -> Iterator[str]:
        if self._fh is None:
            raise InputError("file already closed", path=self.path)
        while True:
            data = self._next_bytes()
            if not data:
                return
            self.lineno += 1
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise line_not_utf8(data, exc, self.path, self.lineno) from None
            if self.lineno == 1 and text.startswith("\ufeff"):
                text = text[1:]
            if text.endswith("\n"):
                text = text[:-1]
                if text.endswith("\r"):
                    text = text[:-1]
            yield text


def open_text(path: PathLike, max_line_bytes: int = MAX_LINE_BYTES,
              max_bytes: Optional[int] = None) -> TextLines:
    """Open a plain or gzip UTF-8 text file for reading line by line.

    >>> with open_text("en_ewt-ud-dev.conllu") as lines:   # doctest: +SKIP
    ...     for line in lines:
    ...         print(lines.lineno, line)
    """
    return TextLines(path, max_line_bytes=max_line_bytes, max_bytes=max_bytes)


def iter_lines(path: PathLike, max_line_bytes: int = MAX_LINE_BYTES,
               max_bytes: Optional[int] = None) -> Iterator[Tuple[int, str]]:
    """Yield ``(line_number, line)`` pairs of a plain or gzip UTF-8 file (1-based numbers)."""
    with open_text(path, max_line_bytes=max_line_bytes, max_bytes=max_bytes) as lines:
        for text in lines:
            yield lines.lineno, text


def read_bytes_limited(path: PathLike, max_bytes: int) -> bytes:
    """Read a whole (possibly gzip) file into memory, refusing more than ``max_bytes``."""
    with open_binary(path) as fh:
        try:
            data = fh.read(max_bytes + 1)
        except _READ_ERRORS as exc:
            raise InputError(f"cannot read (corrupt or truncated compressed data?): {exc}",
                             path=path) from None
    if len(data) > max_bytes:
        raise InputError(f"file larger than the limit of {max_bytes} bytes", path=path)
    return data


__all__ = ["GZIP_MAGIC", "MAX_LINE_BYTES", "TextLines", "check_regular_file", "is_gzip", "iter_lines", "open_binary",
           "open_text", "read_bytes_limited"]
