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
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from sys import intern
from typing import List, Optional

from elmo_engine.errors import InputError
from elmo_engine.io.datasets.sentences import MAX_FILE_BYTES, MAX_SENTENCE_BYTES, clean_sentence
from elmo_engine.io.datasets.textio import PathLike, open_text


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
        if not self.blank:
            return ""
        shown = ", ".join(str(n) for n in self.blank[:10]) + (", …" if len(self.blank) > 10
                                                              else "")
        word = "line" if len(self.blank) == 1 else "lines"
        return (f"skipped {len(self.blank)} blank {word} (line{'s' if len(self.blank) > 1 else ''}"
                f" {shown}) of {self.path.name}")


def _is_comment(raw: str) -> bool:
    return raw.lstrip().startswith("#")


def read_text_input(path: PathLike, pretokenized: bool = False,
                    max_bytes: Optional[int] = MAX_FILE_BYTES,
                    max_tokens: Optional[int] = None) -> TextInput:
    """Read a plain or grouped file of sentences (see the module docstring).

    Parameters
    ----------
    path : UTF-8 text, plain or gzip
    pretokenized : split on whitespace instead of tokenizing typed text
    max_bytes : a bigger file (after decompression) is refused; None: no limit
    max_tokens : most tokens in all (None: no limit)

    Raises
    ------
    InputError
        Missing or unreadable file, not UTF-8, NUL bytes, a line over the byte or token limit,
        a grouped line with an empty group, too many tokens, or no sentence at all — naming
        the file and the line.
    """
    from elmo_engine.model.tokenize import MAX_SENTENCE_TOKENS, tokenize

    path = Path(path)
    raw: List[tuple] = []
    with open_text(path, max_line_bytes=MAX_SENTENCE_BYTES, max_bytes=max_bytes) as lines:
        for text in lines:
            if "\x00" in text:
                raise lines.error("holds NUL bytes: this is not a text file of sentences")
            raw.append((lines.lineno, text))
    content = [(n, t) for n, t in raw if t.strip() and not _is_comment(t)]
    grouped = bool(content) and all("\t" in t for _, t in content)
    out = TextInput(path, [], [], [] if grouped else None, [])
    total = 0
    for lineno, text in raw:
        group = None
        if grouped:
            if not text.strip() or _is_comment(text):
                if not text.strip():
                    out.blank.append(lineno)
                continue
            group, text = text.split("\t", 1)
            group = clean_sentence(group, MAX_SENTENCE_TOKENS)
            if not group:
                raise InputError("empty group before the TAB (group<TAB>sentence)", path=path,
                                 line=lineno)
        # the token limit before any per-token work: pieces past it are neither normalised
        # nor tokenized
        sentence = clean_sentence(text, MAX_SENTENCE_TOKENS)
        toks = sentence.split() if pretokenized else tokenize(sentence, MAX_SENTENCE_TOKENS)
        if not toks:
            out.blank.append(lineno)
            continue
        if len(toks) > MAX_SENTENCE_TOKENS:
            raise InputError(f"more than {MAX_SENTENCE_TOKENS} tokens; the limit is "
                             f"{MAX_SENTENCE_TOKENS} per sentence (split the line)", path=path,
                             line=lineno)
        toks = [intern(t) for t in toks]   # repeated words share one string (Zipf; bombs)
        total += len(toks)
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


__all__ = ["TextInput", "read_text_input"]
