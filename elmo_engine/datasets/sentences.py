"""A file of sentences, one per line (the app's *Open sentences…*), plain or gzip, UTF-8.

Each line is cleaned before use: Unicode NFC normalisation; control characters (C0 other than
tab, DEL, C1), zero-width and bidirectional-format characters, byte-order marks and the Unicode
line/paragraph separators become spaces; runs of whitespace collapse to one space; the line is
stripped. Lines that are then empty are skipped. A NUL byte means the file is not text and is
refused. The line numbers kept with each sentence are those of the file.
"""
from __future__ import annotations

import re
import unicodedata
from typing import Iterator, List, Optional, Tuple

from elmo_engine.datasets.textio import PathLike, open_text
from elmo_engine.errors import InputError

#: default limits: a file of sentences bigger than this is almost surely the wrong file
MAX_FILE_BYTES = 64 << 20
MAX_SENTENCE_BYTES = 1 << 20
_INVISIBLE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2028\u2029"
                        "\u2060-\u2064\u2066-\u2069\ufeff\ufff9-\ufffb]")


def clean_sentence(text: str) -> str:
    """NFC-normalise ``text``, turn invisible/control characters into spaces, collapse spaces."""
    text = unicodedata.normalize("NFC", text)
    text = _INVISIBLE.sub(" ", text)
    return " ".join(text.split())


def iter_sentences(path: PathLike, max_bytes: int = MAX_FILE_BYTES,
                   max_sentence_bytes: int = MAX_SENTENCE_BYTES,
                   limit: Optional[int] = None) -> Iterator[Tuple[int, str]]:
    """Yield ``(line_number, sentence)`` for each non-blank line of the file, cleaned.

    Raises
    ------
    InputError
        The file is missing, bigger than ``max_bytes`` (after decompression), has a line longer
        than ``max_sentence_bytes``, is not UTF-8, holds NUL bytes (a binary file) or is a
        corrupt gzip — naming the file and the line.
    """
    if limit is not None and limit < 0:
        raise InputError(f"limit must be >= 0, got {limit}")
    produced = 0
    if limit == 0:
        return
    with open_text(path, max_line_bytes=max_sentence_bytes, max_bytes=max_bytes) as lines:
        for text in lines:
            if "\x00" in text:
                raise lines.error("holds NUL bytes: this is not a text file of sentences")
            sentence = clean_sentence(text)
            if sentence:
                yield lines.lineno, sentence
                produced += 1
                if limit is not None and produced >= limit:
                    return


def read_sentences(path: PathLike, max_bytes: int = MAX_FILE_BYTES,
                   max_sentence_bytes: int = MAX_SENTENCE_BYTES,
                   limit: Optional[int] = None) -> List[str]:
    """The cleaned, non-blank lines of a sentences file (see :func:`iter_sentences`)."""
    return [s for _, s in iter_sentences(path, max_bytes=max_bytes,
                                         max_sentence_bytes=max_sentence_bytes, limit=limit)]
