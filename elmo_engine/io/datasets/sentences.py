"""The one reader of sentence files, one sentence per line, plain or gzip, UTF-8: the app's
*Open sentences…*, ``embed``, ``export vectors``, ``contexts``, ``layers`` and ``project`` all
read text through :func:`iter_sentences`, so every command sees the same sentences.

The file must be a regular file (a FIFO, a device such as ``/dev/zero`` or a folder is refused
before it is opened) of at most ``MAX_FILE_BYTES`` (64 MiB, after decompression), read as a
stream, line by line, with lines of at most ``MAX_SENTENCE_BYTES`` (1 MiB). A byte-order mark at
the start of the file is dropped. A NUL byte means the file is not text and is refused, naming
the line. Each line is cleaned before use: Unicode NFC normalisation; control characters (C0
other than tab, DEL, C1), zero-width and bidirectional-format characters, byte-order marks and
the Unicode line/paragraph separators become spaces; runs of whitespace collapse to one space;
the line is stripped. A line holding a token of more than ``MAX_TOKEN_CHARS`` (1,024)
characters as the typed-text tokenizer splits it (or a group name that long) is refused, naming
the line: no model reads more, and the app lays every token out as text. Lines that are then
empty are skipped — except by the commands whose output is keyed by line number (``embed``,
``export vectors``: :func:`read_token_lines`), which refuse them, naming the line. The line
numbers kept with each sentence are those of the file.
"""
from __future__ import annotations

import re
import unicodedata
from typing import Callable, Iterator, List, Optional, Tuple

from elmo_engine.io.datasets.textio import PathLike, open_text
from elmo_engine.errors import InputError
from elmo_engine.model.tokenize import MAX_SENTENCE_TOKENS, MAX_TOKEN_CHARS, overlong_token

#: default limits: a file of sentences bigger than this is almost surely the wrong file
MAX_FILE_BYTES = 16 << 20      # ~3.5 million tokens; ~0.5 GB of token lists at the limit
MAX_SENTENCE_BYTES = 1 << 20
_INVISIBLE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2028\u2029"
                        "\u2060-\u2064\u2066-\u2069\ufeff\ufff9-\ufffb]")


#: pieces up to this many characters are normalised whole (every real word)
_NFC_WHOLE = 64
#: UAX #15's stream-safe limit: a run of more non-starters is normalised this many at a time
_MAX_NONSTARTERS = 30
#: a longer piece is normalised in segments of about this many characters, cut before a starter
_NFC_SEGMENT = 256


def clean_sentence(text: str, max_pieces: Optional[int] = None) -> str:
    """Turn invisible/control characters into spaces, collapse spaces, NFC-normalise each
    whitespace-separated piece (:func:`nfc_piece`).

    With ``max_pieces``, only the first ``max_pieces + 1`` pieces are kept (a line with more is
    refused by the caller's token limit; nothing past it is normalised). Linear in the length
    of the text: normalising a whole line of alternating combining marks took time growing
    with its square (issue 25)."""
    pieces = _INVISIBLE.sub(" ", text).split()
    if max_pieces is not None and len(pieces) > max_pieces + 1:
        del pieces[max_pieces + 1:]
    return " ".join(nfc_piece(p) for p in pieces)


def nfc_piece(piece: str) -> str:
    """NFC of one piece of text. A piece longer than 64 characters is normalised in segments
    cut before a starter (a character of canonical combining class 0, not a Hangul jamo) once a
    segment holds 256 characters, and runs of more than 30 combining marks (UAX #15's
    stream-safe limit; no text needs more) 30 at a time, so the time is linear: CPython's
    canonical reordering of one long run of marks is quadratic."""
    if len(piece) <= _NFC_WHOLE:
        return unicodedata.normalize("NFC", piece)
    out, start, run = [], 0, 0
    for i, c in enumerate(piece):
        if unicodedata.combining(c):
            run += 1
            if run > _MAX_NONSTARTERS:
                out.append(unicodedata.normalize("NFC", piece[start:i]))
                start, run = i, 1
        else:
            run = 0
            if i - start >= _NFC_SEGMENT and not ("\u1100" <= c <= "\u11ff"
                                                  or "\u3130" <= c <= "\u318f"):
                out.append(unicodedata.normalize("NFC", piece[start:i]))
                start = i
    out.append(unicodedata.normalize("NFC", piece[start:]))
    return "".join(out)


def iter_sentences(path: PathLike, max_bytes: int = MAX_FILE_BYTES,
                   max_sentence_bytes: int = MAX_SENTENCE_BYTES,
                   limit: Optional[int] = None,
                   keep_blank: bool = False) -> Iterator[Tuple[int, str]]:
    """Yield ``(line_number, sentence)`` for each non-blank line of the file, cleaned (with
    ``keep_blank`` also the lines that are empty once cleaned, as ``""``).

    Raises
    ------
    InputError
        The file is missing, bigger than ``max_bytes`` (after decompression), has a line longer
        than ``max_sentence_bytes``, is not UTF-8, holds NUL bytes (a binary file) or is a
        corrupt gzip, or holds a token longer than ``MAX_TOKEN_CHARS`` — naming the file and
        the line.
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
            sentence = clean_sentence(text, MAX_SENTENCE_TOKENS)
            check_token_lengths(sentence, lines.error)
            if sentence or keep_blank:
                yield lines.lineno, sentence
                produced += 1
                if limit is not None and produced >= limit:
                    return


def check_token_lengths(sentence: str, error: Callable[[str], InputError], group: str = "",
                        pretokenized: bool = False) -> None:
    """Raise ``error(message)`` (an :class:`InputError` naming the file and the line) when the
    cleaned ``sentence`` holds a token longer than ``MAX_TOKEN_CHARS`` characters, or when the
    line's ``group`` name is that long."""
    if len(group) > MAX_TOKEN_CHARS:
        raise error(f"a group name of {len(group):,} characters: at most {MAX_TOKEN_CHARS:,}")
    n = overlong_token(sentence, pretokenized)
    if n:
        raise error(f"a token of {n:,} characters: a token has at most {MAX_TOKEN_CHARS:,} "
                    "(the widest a model reads)")


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
            check_token_lengths(sentence, lines.error, group)
            if sentence:
                out.append((group, sentence))
    return out


def read_token_lines(path: PathLike, tokenize: bool = False) -> List[List[str]]:
    """The tokens of every line of a sentence file (``embed``, ``export vectors``): each line
    read and cleaned by :func:`iter_sentences`, then split on whitespace, or with ``tokenize``
    by the typed-text tokenizer.

    The lines are the sentences of an output keyed by line number, so nothing is skipped: a line
    that is empty once cleaned, or one over ``MAX_SENTENCE_TOKENS`` tokens, is an error naming
    the line. Reading is one pass over the file (linear in its size).
    """
    from elmo_engine.model.tokenize import MAX_SENTENCE_TOKENS
    from elmo_engine.model.tokenize import tokenize as tok_fn, whitespace_tokenize

    sentences = []
    for lineno, text in iter_sentences(path, keep_blank=True):
        toks = tok_fn(text, MAX_SENTENCE_TOKENS) if tokenize else whitespace_tokenize(text)
        if not toks:
            raise InputError("empty line (or only invisible characters): every line must hold "
                             "a sentence", path=path, line=lineno)
        if len(toks) > MAX_SENTENCE_TOKENS:
            raise InputError(f"more than {MAX_SENTENCE_TOKENS} tokens; the limit is "
                             f"{MAX_SENTENCE_TOKENS} per sentence (split the line)", path=path,
                             line=lineno)
        sentences.append(toks)
    if not sentences:
        raise InputError("the input file has no sentences", path=path)
    return sentences
