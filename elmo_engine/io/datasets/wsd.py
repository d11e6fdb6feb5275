"""Word-sense data in the unified WSD evaluation framework's format (Raganato et al., EACL 2017).

The XML (``*.data.xml``, plain or gzip)::

    <corpus lang="en" source="semeval2007">
      <text id="d000">
        <sentence id="d000.s000">
          <wf lemma="you" pos="PRON">Your</wf>
          <instance id="d000.s000.t000" lemma="refer" pos="VERB">referred</instance>
          …

and the gold key file (``*.gold.key.txt``): ``instance_id sense_key [sense_key …]`` per line.

The XML is parsed with defusedxml with DTDs forbidden, so no entity is ever expanded (the
"billion laughs" file is refused) and nothing external is fetched; it is streamed (the whole
SemCor file is never held as a tree). Words whose text holds spaces (multiword expressions such as
"took place") become several tokens; the instance spans them.
"""
from __future__ import annotations

from typing import Dict, Iterator, List, Optional, Tuple

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import DefusedXMLParser, ParseError

from elmo_engine.io.datasets.records import WsdInstance, WsdSentence
from elmo_engine.io.datasets.textio import PathLike, _READ_ERRORS, iter_lines, open_binary
from elmo_engine.io.datasets.wordnet import (
                                             SENSE_KEY_RE,
                                             WordNet,
                                             candidates,
                                             first_sense,
                                             supersense,
                                             )
from elmo_engine.errors import InputError

__all__ = ["read_wsd", "read_keys", "count_wsd", "candidates", "first_sense", "supersense"]

_CHUNK = 1 << 16
#: longest text of one <wf>/<instance>, in characters
MAX_WORD_CHARS = 1000


def read_keys(path: PathLike) -> Dict[str, Tuple[str, ...]]:
    """Read a gold key file: ``{instance_id: (sense_key, …)}``.

    Raises
    ------
    InputError
        For a line without a key, a malformed sense key or an id given twice (file and line).
    """
    keys: Dict[str, Tuple[str, ...]] = {}
    for lineno, line in iter_lines(path):
        parts = line.split()
        if not parts:
            continue
        if len(parts) < 2:
            raise InputError(f"instance {parts[0][:80]!r} has no sense key", path=path, line=lineno)
        for key in parts[1:]:
            if SENSE_KEY_RE.match(key) is None:
                raise InputError(f"not a WordNet sense key: {key[:80]!r}", path=path, line=lineno)
        if parts[0] in keys:
            raise InputError(f"instance {parts[0][:80]!r} appears twice", path=path, line=lineno)
        keys[parts[0]] = tuple(parts[1:])
    return keys


def read_wsd(xml_path: PathLike, keys_path: Optional[PathLike] = None,
             wordnet: Optional[WordNet] = None, limit: Optional[int] = None
             ) -> Iterator[WsdSentence]:
    """Yield the sentences of a framework XML file with their instances.

    Parameters
    ----------
    xml_path : ``*.data.xml``, plain or gzip-compressed
    keys_path : the gold key file (plain or gzip); without it every ``keys`` is empty
    wordnet : if given, each instance's ``candidates`` are its lemma's senses for its POS, in
        sense-number order (see :class:`~elmo_engine.io.datasets.wordnet.WordNet`)
    limit : stop after this many sentences

    Raises
    ------
    InputError
        Malformed or truncated XML, a DTD or entity declaration, an element out of place, an
        instance without id/lemma/pos, an id given twice — naming the file and the line.
    """
    if limit is not None and limit < 0:
        raise InputError(f"limit must be >= 0, got {limit}")
    gold = read_keys(keys_path) if keys_path is not None else {}
    if limit == 0:
        return
    handler = _Handler(xml_path, gold, wordnet)
    parser = DefusedXMLParser(target=handler, forbid_dtd=True, forbid_entities=True,
                              forbid_external=True)
    handler.expat = parser.parser
    produced = 0
    with open_binary(xml_path) as fh:
        while True:
            try:
                chunk = fh.read(_CHUNK)
            except _READ_ERRORS as exc:
                raise InputError(f"cannot read (corrupt or truncated compressed data?): {exc}",
                                 path=xml_path, line=handler.line()) from None
            try:
                if chunk:
                    parser.feed(chunk)
                else:
                    parser.close()
            except ParseError as exc:
                line = exc.position[0] if getattr(exc, "position", None) else handler.line()
                raise InputError(f"malformed XML: {_parse_message(exc)}", path=xml_path,
                                 line=line) from None
            except DefusedXmlException as exc:
                raise InputError(f"XML declares a DTD or entities, which are refused "
                                 f"({type(exc).__name__})", path=xml_path,
                                 line=handler.line()) from None
            except (ValueError, LookupError, RecursionError, MemoryError) as exc:
                raise InputError(f"cannot parse XML: {exc}", path=xml_path,
                                 line=handler.line()) from None
            for sent in handler.drain():
                yield sent
                produced += 1
                if limit is not None and produced >= limit:
                    return
            if not chunk:
                return


def _parse_message(exc: ParseError) -> str:
    msg = str(exc)
    return msg.split(": line", 1)[0] if ": line" in msg else msg


class _Handler:
    """ElementTree parser target: builds WsdSentence records as their end tags arrive."""

    def __init__(self, path: PathLike, gold: Dict[str, Tuple[str, ...]],
                 wordnet: Optional[WordNet]) -> None:
        self.path = path
        self.gold = gold
        self.wordnet = wordnet
        self.expat = None
        self.stack: List[str] = []
        self.done: List[WsdSentence] = []
        self.ids: set = set()
        self.text_id: Optional[str] = None
        self._reset_sentence()
        self.word_attrs: Optional[Dict[str, str]] = None
        self.word_text: List[str] = []
        self.word_len = 0

    def _reset_sentence(self) -> None:
        self.sent_id: Optional[str] = None
        self.sent_line = 0
        self.tokens: List[str] = []
        self.instances: List[WsdInstance] = []

    def line(self) -> Optional[int]:
        return None if self.expat is None else self.expat.CurrentLineNumber

    def error(self, message: str) -> InputError:
        return InputError(message, path=self.path, line=self.line())

    def drain(self) -> List[WsdSentence]:
        out, self.done = self.done, []
        return out

    # ElementTree target interface -----------------------------------------------------------
    def start(self, tag: str, attrs: Dict[str, str]) -> None:
        parent = self.stack[-1] if self.stack else None
        allowed = {None: ("corpus",), "corpus": ("text", "sentence"), "text": ("sentence",),
                   "sentence": ("wf", "instance")}.get(parent, ())
        if tag not in allowed:
            where = f"inside <{parent}>" if parent else "as the root element"
            raise self.error(f"unexpected element <{tag[:40]}> {where}")
        self.stack.append(tag)
        if tag == "text":
            self.text_id = attrs.get("id")
        elif tag == "sentence":
            self._reset_sentence()
            self.sent_id = attrs.get("id") or f"s{len(self.ids)}"
            self.sent_line = self.line() or 0
        elif tag in ("wf", "instance"):
            self.word_attrs = dict(attrs)
            self.word_text = []
            self.word_len = 0

    def data(self, text: str) -> None:
        if self.stack and self.stack[-1] in ("wf", "instance"):
            self.word_len += len(text)
            if self.word_len > MAX_WORD_CHARS:
                raise self.error(f"word longer than {MAX_WORD_CHARS} characters")
            self.word_text.append(text)
        elif text.strip():
            where = f"<{self.stack[-1]}>" if self.stack else "the document"
            raise self.error(f"unexpected text {text.strip()[:40]!r} in {where}")

    def end(self, tag: str) -> None:
        self.stack.pop()
        if tag in ("wf", "instance"):
            self._end_word(tag)
        elif tag == "sentence":
            if not self.tokens:
                raise self.error(f"sentence {self.sent_id!r} has no words")
            meta = {"path": str(self.path), "line": self.sent_line}
            if self.text_id is not None:
                meta["text_id"] = self.text_id
            self.done.append(WsdSentence(str(self.sent_id), tuple(self.tokens),
                                         tuple(self.instances), meta))
            self._reset_sentence()

    def close(self) -> None:
        return None

    def _end_word(self, tag: str) -> None:
        words = "".join(self.word_text).split()
        if not words:
            raise self.error(f"empty <{tag}>")
        attrs = self.word_attrs or {}
        if tag == "instance":
            missing = [a for a in ("id", "lemma", "pos") if not attrs.get(a)]
            if missing:
                raise self.error(f"<instance> without {', '.join(missing)}")
            iid = attrs["id"]
            if iid in self.ids:
                raise self.error(f"instance id {iid[:80]!r} appears twice")
            self.ids.add(iid)
            start = len(self.tokens)
            self.instances.append(WsdInstance(
                id=iid, start=start, stop=start + len(words), lemma=attrs["lemma"],
                pos=attrs["pos"], keys=self.gold.get(iid, ()),
                candidates=self._candidates(attrs["lemma"], attrs["pos"])))
        self.tokens.extend(words)

    def _candidates(self, lemma: str, pos: str) -> Tuple[str, ...]:
        if self.wordnet is None:
            return ()
        try:
            return self.wordnet.candidates(lemma, pos)
        except InputError:  # a POS WordNet does not have (e.g. "X"): no candidates
            return ()


def count_wsd(xml_path: PathLike, keys_path: Optional[PathLike] = None) -> Dict[str, int]:
    """Sentence, token, instance and keyed-instance counts of a framework file."""
    counts = {"sentences": 0, "tokens": 0, "instances": 0, "keyed": 0}
    for sent in read_wsd(xml_path, keys_path):
        counts["sentences"] += 1
        counts["tokens"] += len(sent.tokens)
        counts["instances"] += len(sent.instances)
        counts["keyed"] += sum(1 for inst in sent.instances if inst.keys)
    return counts
