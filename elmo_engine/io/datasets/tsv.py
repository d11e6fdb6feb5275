"""``token<TAB>label`` files: one token per line, a blank line between sentences.

Format (plain or gzip, UTF-8)::

    # id = bank.n.01.0          <- optional "# key = value" lines before a sentence (no tab in them)
    they<TAB>_
    pulled<TAB>_
    …
    bank<TAB>NOUN
    <blank line>

* Every token line has exactly two tab-separated fields, a non-empty token and a label.
* The label ``_`` (configurable) means "no label": the token is context only, not a target.
* A line starting with ``#`` that holds no tab is a comment; ``# key = value`` comments before a
  sentence's first token go into its ``meta``. (A token ``#`` is written ``#<TAB>label``.)
"""
from __future__ import annotations

import re
from typing import Any, Dict, Iterator, List, Optional

from elmo_engine.io.datasets.records import LabelledSentence
from elmo_engine.io.datasets.textio import MAX_LINE_BYTES, PathLike, open_text
from elmo_engine.errors import InputError

_COMMENT_KV = re.compile(r"#\s*([^=\s][^=]*?)\s*=\s?(.*)\Z")


def read_tsv(path: PathLike, limit: Optional[int] = None, unlabelled: str = "_",
             max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[LabelledSentence]:
    """Yield the sentences of a ``token<TAB>label`` file.

    Parameters
    ----------
    path : the file, plain or gzip-compressed
    limit : stop after this many sentences
    unlabelled : the label that means "no label" (gives ``None``)
    max_line_bytes : a longer line raises InputError

    Yields
    ------
    LabelledSentence
        ``meta`` holds ``path``, ``line`` (the sentence's first line) and its comments.

    Raises
    ------
    InputError
        A line without exactly one tab, an empty token or label — naming the file and the line.
    """
    if limit is not None and limit < 0:
        raise InputError(f"limit must be >= 0, got {limit}")
    if limit == 0:
        return
    produced = 0
    tokens: List[str] = []
    labels: List[Optional[str]] = []
    meta: Dict[str, Any] = {}
    start = 0
    with open_text(path, max_line_bytes=max_line_bytes) as lines:
        for text in lines:
            if text.strip() == "" and "\t" not in text:
                if tokens:
                    yield _sentence(tokens, labels, meta, path, start)
                    produced += 1
                    if limit is not None and produced >= limit:
                        return
                tokens, labels, meta, start = [], [], {}, 0
                continue
            if text.startswith("#") and "\t" not in text:
                if tokens:
                    raise lines.error("comment line inside a sentence (put comments before its "
                                      "first token, after a blank line)")
                start = start or lines.lineno
                m = _COMMENT_KV.match(text)
                if m:
                    meta[m.group(1)] = m.group(2)
                continue
            fields = text.split("\t")
            if len(fields) != 2:
                raise lines.error(f"expected 'token<TAB>label' (2 fields), found {len(fields)} "
                                  f"field{'s' if len(fields) != 1 else ''}")
            token, label = fields[0].strip(), fields[1].strip()
            if not token:
                raise lines.error("empty token")
            if not label:
                raise lines.error(f"empty label (write {unlabelled!r} for a token without one)")
            start = start or lines.lineno
            tokens.append(token)
            labels.append(None if label == unlabelled else label)
        if tokens:
            yield _sentence(tokens, labels, meta, path, start)


def _sentence(tokens, labels, meta, path, start) -> LabelledSentence:
    info = {"path": str(path), "line": start}
    info.update(meta)
    return LabelledSentence(tuple(tokens), tuple(labels), info)


def write_tsv(sentences, path: PathLike, unlabelled: str = "_",
              meta_keys: Optional[List[str]] = None) -> None:
    """Write sentences in this format, atomically (``None`` labels as ``unlabelled``).

    ``meta_keys`` lists which ``meta`` entries to write as ``# key = value`` comments.
    """
    from elmo_engine.atomic import atomic_write_text

    out: List[str] = []
    for sent in sentences:
        for key in meta_keys or ():
            if key in sent.meta:
                out.append(f"# {key} = {sent.meta[key]}")
        for tok, lab in zip(sent.tokens, sent.labels):
            if "\t" in tok or "\n" in tok or not tok.strip():
                raise InputError(f"token {tok!r} cannot be written to a TSV file")
            out.append(f"{tok}\t{unlabelled if lab is None else lab}")
        out.append("")
    atomic_write_text(path, "\n".join(out) + ("\n" if out else ""))
