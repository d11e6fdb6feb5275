"""CoNLL-U reader (Universal Dependencies), streaming, plain or gzip.

Follows https://universaldependencies.org/format.html: a sentence is a block of lines ended by a
blank line; comment lines start with ``#``; every other line has exactly 10 tab-separated fields
``ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC``. ``ID`` is an integer (a syntactic word,
numbered 1, 2, 3 … in the sentence), a range ``1-2`` (a multiword token such as "don't", whose
words follow on their own lines) or a decimal ``8.1`` (an empty node of the enhanced graph).
The tokens fed to the model are the syntactic words: ranges and empty nodes are skipped, and
checked only for well-formedness.
"""
from __future__ import annotations

import re
from typing import Dict, Iterator, List, Optional

from elmo_engine.io.datasets.records import LabelledSentence
from elmo_engine.io.datasets.textio import MAX_LINE_BYTES, PathLike, TextLines, open_text
from elmo_engine.errors import InputError

#: column index of each label the reader can return
LABEL_COLUMNS: Dict[str, int] = {"upos": 3, "xpos": 4, "deprel": 7, "lemma": 2}
#: ``feats:NAME`` reads one UD feature of the FEATS column (``feats:Number`` → ``Sing``/``Plur``,
#: ``None`` where the word lacks it)
FEATS_COLUMN = 5
FEATS_PREFIX = "feats:"
_FEATURE_NAME = re.compile(r"[A-Za-z0-9\[\]]+\Z")
_INT_ID = re.compile(r"[1-9][0-9]*\Z")
_RANGE_ID = re.compile(r"([1-9][0-9]*)-([1-9][0-9]*)\Z")
_EMPTY_ID = re.compile(r"(0|[1-9][0-9]*)\.([1-9][0-9]*)\Z")
_COMMENT_KV = re.compile(r"#\s*([^=\s][^=]*?)\s*=\s?(.*)\Z")


def read_conllu(path: PathLike, label: str = "upos", limit: Optional[int] = None,
                max_line_bytes: int = MAX_LINE_BYTES,
                max_bytes: Optional[int] = None) -> Iterator[LabelledSentence]:
    """Yield the sentences of a CoNLL-U file, one :class:`LabelledSentence` at a time.

    Parameters
    ----------
    path : a ``.conllu`` file, plain or gzip-compressed (detected by its magic bytes)
    label : ``"upos"``, ``"xpos"``, ``"deprel"`` (or ``"lemma"``), or ``"feats:NAME"`` for one
        UD feature of FEATS (e.g. ``feats:Number``); the field ``_`` (or a word without the
        feature) gives ``None``
    limit : stop after this many sentences (``None``: all)
    max_line_bytes : a longer line raises InputError
    max_bytes : reading past this many bytes (decompressed) raises InputError (None: no limit)

    Yields
    ------
    LabelledSentence
        ``tokens`` are the FORMs of the syntactic words; ``meta`` holds ``path``, ``line`` (first
        line of the sentence), ``sent_id`` and ``text`` when the comments give them, every other
        ``# key = value`` comment under ``comments``, and ``upos`` (the UPOS tuple, whatever the
        chosen label).

    Raises
    ------
    InputError
        For a malformed line (wrong number of fields, bad or out-of-order ID, empty FORM, a range
        not followed by its words), naming the file and the line.
    """
    feature: Optional[str] = None
    if label.startswith(FEATS_PREFIX):
        feature = label[len(FEATS_PREFIX):]
        if not _FEATURE_NAME.match(feature):
            raise InputError(f"bad CoNLL-U feature name {feature!r} (e.g. feats:Number)")
    elif label not in LABEL_COLUMNS:
        raise InputError(f"unknown CoNLL-U label {label!r}; choose one of {sorted(LABEL_COLUMNS)}"
                         " or feats:NAME")
    if limit is not None and limit < 0:
        raise InputError(f"limit must be >= 0, got {limit}")
    col = FEATS_COLUMN if feature is not None else LABEL_COLUMNS[label]
    produced = 0
    if limit == 0:
        return
    with open_text(path, max_line_bytes=max_line_bytes, max_bytes=max_bytes) as lines:
        block = _Block(lines, col, feature)
        for text in lines:
            if text.strip() == "":
                sent = block.finish()
                if sent is not None:
                    yield sent
                    produced += 1
                    if limit is not None and produced >= limit:
                        return
                block = _Block(lines, col, feature)
            elif text.startswith("#"):
                block.comment(text)
            else:
                block.word_line(text)
        sent = block.finish()
        if sent is not None:
            yield sent


class _Block:
    """The lines of one sentence being read."""

    def __init__(self, lines: TextLines, col: int, feature: Optional[str] = None) -> None:
        self.lines = lines
        self.col = col
        self.feature = feature
        self.start: Optional[int] = None
        self.comments: Dict[str, str] = {}
        self.forms: List[str] = []
        self.labels: List[Optional[str]] = []
        self.upos: List[Optional[str]] = []
        self.range_end = 0      # last word id a pending multiword range covers
        self.range_line = 0
        self.last_empty = (0, 0)  # (word id, sub id) of the last empty node

    def _begin(self) -> None:
        if self.start is None:
            self.start = self.lines.lineno

    def comment(self, text: str) -> None:
        self._begin()
        if self.forms:
            raise self.lines.error("comment line inside a sentence (comments must come before "
                                   "its first word line)")
        m = _COMMENT_KV.match(text)
        if m:
            self.comments[m.group(1)] = m.group(2)

    def word_line(self, text: str) -> None:
        self._begin()
        fields = text.split("\t")
        if len(fields) != 10:
            raise self.lines.error(f"expected 10 tab-separated fields, found {len(fields)}")
        wid, form = fields[0], fields[1]
        n = len(self.forms)
        if _INT_ID.match(wid):
            if int(wid) != n + 1:
                raise self.lines.error(f"word ID {wid} out of sequence (expected {n + 1})")
            if not form:
                raise self.lines.error("empty FORM field")
            self.forms.append(form)
            value = fields[self.col]
            label = None if value in ("", "_") else value
            if label is not None and self.feature is not None:
                label = _feature(label, self.feature)
            self.labels.append(label)
            self.upos.append(None if fields[3] in ("", "_") else fields[3])
            return
        m = _RANGE_ID.match(wid)
        if m:
            a, b = int(m.group(1)), int(m.group(2))
            if a != n + 1 or b <= a:
                raise self.lines.error(f"multiword token range {wid} invalid here (the next word "
                                       f"is {n + 1}; a range covers two or more words)")
            if self.range_end > n:
                raise self.lines.error(f"multiword token range {wid} overlaps the one on line "
                                       f"{self.range_line}")
            self.range_end, self.range_line = b, self.lines.lineno
            return
        m = _EMPTY_ID.match(wid)
        if m:
            major, minor = int(m.group(1)), int(m.group(2))
            prev_major, prev_minor = self.last_empty
            expected = prev_minor + 1 if prev_major == major and prev_major == n else 1
            if major != n or minor != expected:
                raise self.lines.error(f"empty node ID {wid} out of sequence (expected {n}."
                                       f"{expected})")
            self.last_empty = (major, minor)
            return
        raise self.lines.error(f"bad ID field {wid[:40]!r} (expected a word number from 1, a "
                               f"range like '1-2' or an empty node like '8.1')")

    def finish(self) -> Optional[LabelledSentence]:
        """The finished sentence, or ``None`` for a block of comments only."""
        if self.start is None:
            return None
        if not self.forms:
            if self.range_end or self.last_empty != (0, 0):
                raise self.lines.error("sentence has no syntactic words", line=self.start)
            return None
        if self.range_end > len(self.forms):
            raise self.lines.error(f"multiword token range ends at word {self.range_end} but the "
                                   f"sentence has {len(self.forms)} words", line=self.range_line)
        meta = {"path": str(self.lines.path), "line": self.start, "upos": tuple(self.upos)}
        if "sent_id" in self.comments:
            meta["sent_id"] = self.comments["sent_id"]
        if "text" in self.comments:
            meta["text"] = self.comments["text"]
        others = {k: v for k, v in self.comments.items() if k not in ("sent_id", "text")}
        if others:
            meta["comments"] = others
        return LabelledSentence(tuple(self.forms), tuple(self.labels), meta)


def _feature(feats: str, name: str) -> Optional[str]:
    """The value of feature ``name`` in a FEATS field ``A=x|B=y`` (None if absent)."""
    for item in feats.split("|"):
        key, sep, value = item.partition("=")
        if sep and key == name:
            return value or None
    return None


def count_conllu(path: PathLike) -> Dict[str, int]:
    """Sentence and syntactic-word counts of a CoNLL-U file (reads it all)."""
    sentences = words = 0
    for sent in read_conllu(path):
        sentences += 1
        words += len(sent)
    return {"sentences": sentences, "words": words}
