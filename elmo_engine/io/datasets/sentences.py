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

from elmo_engine.io.datasets.textio import PathLike, open_text
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


def is_grouped(path: PathLike) -> bool:
    """Whether a sentences file is in the ``group<TAB>sentence`` form: its name ends in
    ``.tsv`` (``.tsv.gz``) or its first line that is not blank or a ``#`` comment has a tab."""
    name = str(path).lower()
    if name.endswith((".tsv", ".tsv.gz")):
        return True
    with open_text(path, max_line_bytes=MAX_SENTENCE_BYTES, max_bytes=MAX_FILE_BYTES) as lines:
        for text in lines:
            if text.strip() and not text.lstrip().startswith("#"):
                return "\t" in text
    return False


def read_grouped_sentences(path: PathLike, max_bytes: int = MAX_FILE_BYTES
                           ) -> List[Tuple[str, str]]:
    """``[(group, sentence)]`` of a sentences file, plain (every group ``""``) or in the
    ``group<TAB>sentence`` form (:func:`is_grouped`; there ``#`` lines are comments and a line
    without a tab has no group). Blank lines are skipped; both parts are cleaned like
    :func:`clean_sentence`; the errors are those of :func:`iter_sentences`."""
    if not is_grouped(path):
        return [("", s) for s in read_sentences(path, max_bytes=max_bytes)]
    out: List[Tuple[str, str]] = []
    with open_text(path, max_line_bytes=MAX_SENTENCE_BYTES, max_bytes=max_bytes) as lines:
        for text in lines:
            if "\x00" in text:
                raise lines.error("holds NUL bytes: this is not a text file of sentences")
            if text.lstrip().startswith("#"):
                continue
            group, tab, rest = text.partition("\t")
            group, sentence = (clean_sentence(group), clean_sentence(rest)) if tab else \
                ("", clean_sentence(group))
            if sentence:
                out.append((group, sentence))
    return out


def read_token_lines(path: PathLike, tokenize: bool = False) -> List[List[str]]:
    """The tokens of every line of a UTF-8 file, one sentence per line (``embed``,
    ``export vectors``): split on whitespace, or with ``tokenize`` the typed-text tokenizer.

    Unlike :func:`read_sentences`, nothing is cleaned or skipped: the lines are the sentences
    of an output keyed by line number, so an empty line, an undecodable byte or a line over
    ``MAX_SENTENCE_TOKENS`` tokens is an error naming the line.
    """
    from elmo_engine.model.tokenize import MAX_SENTENCE_TOKENS
    from elmo_engine.model.tokenize import tokenize as tok_fn, whitespace_tokenize

    split = tok_fn if tokenize else whitespace_tokenize
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as e:
        raise InputError(f"cannot read input ({e.strerror or e})", path=path) from None
    sentences = []
    for i, line in enumerate(raw.split(b"\n"), start=1):
        if i == raw.count(b"\n") + 1 and not line:
            break                                      # the final newline
        try:
            text = line.decode("utf-8").rstrip("\r")
        except UnicodeDecodeError as e:
            raise InputError(f"not UTF-8 (byte {e.start + 1} of the line)", path=path, line=i) from None
        toks = split(text)
        if not toks:
            raise InputError("empty line: every line must hold a sentence", path=path, line=i)
        if len(toks) > MAX_SENTENCE_TOKENS:
            raise InputError(f"{len(toks)} tokens; the limit is {MAX_SENTENCE_TOKENS} per "
                             "sentence (split the line)", path=path, line=i)
        sentences.append(toks)
    if not sentences:
        raise InputError("the input file has no sentences", path=path)
    return sentences
