"""The one reader of typed text for the headless commands: a file of sentences, one per line.

Two forms, told apart by the file itself:

* **plain** — every line is a sentence (``embed``, ``contexts``, ``project``, …);
* **grouped** — ``group<TAB>sentence`` on every line that is not blank and not a ``#`` comment
  (the form of ``resources/demo_sentences.tsv``): the group names, say, the sense of the word
  studied. A file is read as grouped when every such line holds a TAB; otherwise it is plain
  and a TAB is just a space.

Lines are cleaned as :func:`elmo_engine.io.datasets.sentences.clean_sentence` cleans them, then
tokenized like typed text (:func:`elmo_engine.model.tokenize.tokenize`) or, with
``pretokenized``, split on whitespace. Blank lines (and lines with no token) are skipped and
counted: :attr:`TextInput.blank` holds their line numbers, :meth:`TextInput.blank_note` says it in
one line. Errors name the file and the line.

One input holds at most ``MAX_INPUT_SENTENCES`` sentences (1,000,000, after ``split``) and twice as
many lines (blank and comment lines count), checked as the file is read: the byte limit alone let
a 100 kB gzip of 52 million one-word lines through, each line a sentence to embed (issue 44).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from sys import intern
from typing import Callable, Iterator, List, Optional, Sequence, Tuple

from elmo_engine.errors import InputError
from elmo_engine.io.datasets.sentences import (MAX_FILE_BYTES, MAX_SENTENCE_BYTES,
                                                check_token_lengths, clean_sentence)
from elmo_engine.io.datasets.textio import PathLike, open_text

#: the most sentences one input holds (after ``split``); a file holds at most twice as many lines
#: (blank and comment lines count). About 25 million tokens of ordinary text, hours of embedding
#: on a CPU; a bigger corpus is split into files.
MAX_INPUT_SENTENCES = 1_000_000


@dataclass
class TextInput:
    """The sentences of a text file, tokenized, with where they came from."""

    path: Path
    tokens: List[List[str]]
    lines: List[int]                       # the file's line number of each sentence
    groups: Optional[List[str]] = None     # per sentence, for a grouped file
    blank: List[int] = field(default_factory=list)   # line numbers of skipped blank lines

    @property
    def grouped(self) -> bool:
        return self.groups is not None

    def blank_note(self) -> str:
        """``"skipped 2 blank lines (lines 3, 9) of in.txt"`` or ``""``."""
        return blank_lines_note(self.path, self.blank, len(self.blank))


def _is_comment(raw: str) -> bool:
    return raw.lstrip().startswith("#")


def blank_lines_note(path: Path, shown: Sequence[int], count: int) -> str:
    """``"skipped 2 blank lines (lines 3, 9) of in.txt"`` (the first ten line numbers)."""
    if not count:
        return ""
    text = ", ".join(str(n) for n in list(shown)[:10]) + (", …" if count > 10 else "")
    word = "line" if count == 1 else "lines"
    return f"skipped {count} blank {word} (line{'s' if count > 1 else ''} {text}) of {path.name}"


def _raw_lines(path: Path, max_bytes: Optional[int], max_sentences: Optional[int]
               ) -> Iterator[Tuple[int, str]]:
    """``(line number, text)`` of every line, refusing NUL bytes (a binary file) and, with
    ``max_sentences``, a line past twice that many."""
    max_lines = None if max_sentences is None else 2 * max_sentences
    with open_text(path, max_line_bytes=MAX_SENTENCE_BYTES, max_bytes=max_bytes) as lines:
        for text in lines:
            if "\x00" in text:
                raise lines.error("holds NUL bytes: this is not a text file of sentences")
            if max_lines is not None and lines.lineno > max_lines:
                raise lines.error(f"more than {max_lines:,} lines: one file holds at most "
                                  f"{max_sentences:,} sentences in {max_lines:,} lines "
                                  "(split it)")
            yield lines.lineno, text


def _too_many_sentences(path: Path, lineno: int, max_sentences: int) -> InputError:
    return InputError(f"more than {max_sentences:,} sentences: one file holds at most "
                      f"{max_sentences:,} (split it)", path=path, line=lineno)


def _is_content(text: str) -> bool:
    return bool(text.strip()) and not _is_comment(text)


def _line_tokens(path: Path, lineno: int, text: str, grouped: bool, pretokenized: bool
                 ) -> Optional[Tuple[Optional[str], List[str]]]:
    """``(group, tokens)`` of one line, or None for a line that is skipped: a comment of a
    grouped file, or a blank line (``tokens == []``)."""
    from elmo_engine.model.tokenize import MAX_SENTENCE_TOKENS, tokenize

    group = None
    if grouped:
        if not _is_content(text):
            return (None, []) if not text.strip() else None
        if "\t" not in text:           # only a prefix was probed (grouped_prefix)
            raise InputError("no TAB, where the lines before it were group<TAB>sentence",
                             path=path, line=lineno)
        group, text = text.split("\t", 1)
        group = clean_sentence(group, MAX_SENTENCE_TOKENS)
        if not group:
            raise InputError("empty group before the TAB (group<TAB>sentence)", path=path,
                             line=lineno)
    # the token limit before any per-token work: pieces past it are neither normalised
    # nor tokenized
    sentence = clean_sentence(text, MAX_SENTENCE_TOKENS)
    toks = sentence.split() if pretokenized else tokenize(sentence, MAX_SENTENCE_TOKENS)
    if len(toks) > MAX_SENTENCE_TOKENS:
        raise InputError(f"more than {MAX_SENTENCE_TOKENS} tokens; the limit is "
                         f"{MAX_SENTENCE_TOKENS} per sentence (split the line)", path=path,
                         line=lineno)
    check_token_lengths(sentence, lambda m: InputError(m, path=path, line=lineno), group or "",
                        pretokenized)
    return group, [intern(t) for t in toks]   # repeated words share one string (Zipf; bombs)


def read_text_input(path: PathLike, pretokenized: bool = False,
                    max_bytes: Optional[int] = MAX_FILE_BYTES,
                    max_tokens: Optional[int] = None,
                    max_sentences: Optional[int] = MAX_INPUT_SENTENCES) -> TextInput:
    """Read a plain or grouped file of sentences (see the module docstring), all in memory
    (:func:`scan_text_input` and :func:`iter_text_input` read one in bounded memory).

    Parameters
    ----------
    path : UTF-8 text, plain or gzip
    pretokenized : split on whitespace instead of tokenizing typed text
    max_bytes : a bigger file (after decompression) is refused; None: no limit
    max_tokens : most tokens in all (None: no limit)
    max_sentences : most sentences, and half the most lines (None: no limit)

    Raises
    ------
    InputError
        Missing or unreadable file, not UTF-8, NUL bytes, a line over the byte or token limit,
        a grouped line with an empty group, too many tokens, sentences or lines, or no sentence
        at all — naming the file and the line.
    """
    path = Path(path)
    raw = list(_raw_lines(path, max_bytes, max_sentences))
    content = [t for _, t in raw if _is_content(t)]
    grouped = bool(content) and all("\t" in t for t in content)
    out = TextInput(path, [], [], [] if grouped else None, [])
    total = 0
    for lineno, text in raw:
        got = _line_tokens(path, lineno, text, grouped, pretokenized)
        if got is None:
            continue
        group, toks = got
        if not toks:
            out.blank.append(lineno)
            continue
        total += len(toks)
        if max_sentences is not None and len(out.tokens) >= max_sentences:
            raise _too_many_sentences(path, lineno, max_sentences)
        if max_tokens is not None and total > max_tokens:
            raise InputError(f"more than {max_tokens:,} tokens; use a smaller file", path=path,
                             line=lineno)
        out.tokens.append(toks)
        out.lines.append(lineno)
        if out.groups is not None and group is not None:    # a grouped file: every line has one
            out.groups.append(group)
    if not out.tokens:
        raise InputError("no sentences in the file", path=path)
    return out


# ---- streaming: the same sentences in bounded memory (``embed``) ------------------------------
Splitter = Callable[[Sequence[str]], List[List[str]]]


@dataclass(frozen=True)
class TextScan:
    """What a first pass over a file of sentences found, holding none of them."""

    path: Path
    grouped: bool
    sentences: int               # after ``split`` when one was given
    tokens: int
    longest: int                 # tokens of the longest sentence
    blank: int                   # blank lines skipped
    blank_shown: Tuple[int, ...]  # the first ten of their line numbers
    occurrences: int = 0         # tokens equal to the ``word`` asked for (exact spelling)

    def blank_note(self) -> str:
        return blank_lines_note(self.path, self.blank_shown, self.blank)


def _is_grouped_stream(path: Path, max_bytes: Optional[int], max_sentences: Optional[int],
                       probe: Optional[int] = None) -> bool:
    """Whether every content line holds a TAB (the grouped form), reading the file once, or
    only until ``probe`` of its lines hold a sentence after the TAB (:func:`grouped_prefix`)."""
    seen = 0
    for _, text in _raw_lines(path, max_bytes, max_sentences):
        if _is_content(text):
            if "\t" not in text:
                return False
            seen += 1
            if probe is not None and text.split("\t", 1)[1].strip():
                probe -= 1
                if probe <= 0:
                    break
    return seen > 0


def grouped_prefix(path: PathLike, words: Optional[int], max_bytes: Optional[int] = None
                   ) -> bool:
    """Whether the file is ``group<TAB>sentence`` as far as a reader of its first ``words``
    words reads it (None: the whole file): every content line holds a TAB until ``words`` + 1
    lines with a sentence after it (a sentence has at least one word; the reader looks one
    sentence past the limit to tell that the file holds more). So that a grouped file is not
    read whole to tell its form (the Units corpora read the first 30,000 words); a line
    without a TAB that such a reader meets after all is an :class:`InputError` naming it."""
    return _is_grouped_stream(Path(path), max_bytes, None if words is not None
                              else MAX_INPUT_SENTENCES,
                              probe=None if words is None else max(1, words) + 1)


def _walk(path: Path, pretokenized: bool, grouped: bool, split: Optional[Splitter],
          max_bytes: Optional[int], max_sentences: Optional[int]
          ) -> Iterator[Tuple[int, Optional[List[str]]]]:
    """``(line number, tokens)`` per sentence (after ``split``), ``(line number, None)`` per
    blank line, in file order, one line at a time; the sentence and line limits are checked as
    they are reached."""
    count = 0
    for lineno, text in _raw_lines(path, max_bytes, max_sentences):
        got = _line_tokens(path, lineno, text, grouped, pretokenized)
        if got is None:
            continue
        if not got[1]:
            yield lineno, None
            continue
        for sentence in (split(got[1]) if split is not None else [got[1]]):
            if sentence:
                count += 1
                if max_sentences is not None and count > max_sentences:
                    raise _too_many_sentences(path, lineno, max_sentences)
                yield lineno, sentence


def iter_text_input(path: PathLike, pretokenized: bool = False, grouped: Optional[bool] = None,
                    split: Optional[Splitter] = None, max_bytes: Optional[int] = None,
                    max_sentences: Optional[int] = MAX_INPUT_SENTENCES,
                    on_blank: Optional[Callable[[int], None]] = None
                    ) -> Iterator[Tuple[int, List[str]]]:
    """Yield ``(line number, tokens)`` for each sentence of the file, one line at a time, the
    same sentences :func:`read_text_input` returns (groups dropped); ``split`` (for example
    the trainer's :func:`elmo_engine.io.datasets.corpus_text.split_sentences`) cuts a line
    holding a paragraph into sentences, each yielded with the line's number. ``grouped`` as found by
    :func:`scan_text_input` (None: an extra pass finds it). Memory does not grow with the
    file: nothing is kept between lines; ``on_blank`` is called with the line number of each
    blank line skipped. Errors as :func:`read_text_input`'s."""
    path = Path(path)
    if grouped is None:
        grouped = _is_grouped_stream(path, max_bytes, max_sentences)
    for lineno, sentence in _walk(path, pretokenized, grouped, split, max_bytes, max_sentences):
        if sentence is not None:
            yield lineno, sentence
        elif on_blank is not None:
            on_blank(lineno)


def scan_text_input(path: PathLike, pretokenized: bool = False, split: Optional[Splitter] = None,
                    max_bytes: Optional[int] = None, word: Optional[str] = None,
                    max_sentences: Optional[int] = MAX_INPUT_SENTENCES) -> TextScan:
    """A first pass over a file of sentences: how many sentences and tokens it holds (after
    ``split``), the longest sentence, the blank lines and (``word``) how often a word occurs,
    reading it line by line (two passes: one to tell the grouped form, one to tokenize). Every
    error a later
    :func:`iter_text_input` could meet is raised here, before anything is written.

    Raises
    ------
    InputError
        As :func:`read_text_input` (the sentence and line limits as the lines are read, so a
        file over them is refused after reading ``max_sentences`` sentences, not all of it),
        and "no sentences in the file".
    """
    path = Path(path)
    grouped = _is_grouped_stream(path, max_bytes, max_sentences)
    sentences = tokens = longest = blank = occurrences = 0
    shown: List[int] = []
    for lineno, sentence in _walk(path, pretokenized, grouped, split, max_bytes, max_sentences):
        if sentence is None:
            blank += 1
            if len(shown) < 10:
                shown.append(lineno)
            continue
        sentences += 1
        tokens += len(sentence)
        longest = max(longest, len(sentence))
        if word is not None:
            occurrences += sentence.count(word)
    if not sentences:
        raise InputError("no sentences in the file", path=path)
    return TextScan(path, grouped, sentences, tokens, longest, blank, tuple(shown), occurrences)


__all__ = ["MAX_INPUT_SENTENCES", "Splitter", "TextInput", "TextScan", "blank_lines_note", "iter_text_input",
           "read_text_input", "scan_text_input"]
