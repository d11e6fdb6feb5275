"""A small WordNet 3.0 sense inventory read straight from the WNDB files (no NLTK).

What the WSD probe needs: the senses of a lemma for a part of speech in WordNet's sense-number
order (sense 1 is the most frequent in the SemCor-based counts: the first-sense / MFS baseline),
and the supersense (lexicographer file) of a sense key. It reads ``index.sense`` (``sense_key
synset_offset sense_number tag_cnt``) and, if present, ``lexnames``, from

* a zip in NLTK's layout (``nltk_data/corpora/wordnet.zip`` holding ``wordnet/index.sense``), or
* a folder of WNDB files (``/usr/share/wordnet`` with Debian's ``wordnet-sense-index``).

A sense key is ``lemma%ss_type:lex_filenum:lex_id:head_word:head_id`` (see ``senseidx(5WN)``);
``ss_type`` 1 noun, 2 verb, 3 adjective, 4 adverb, 5 adjective satellite; ``lex_filenum`` names
the lexicographer file (``noun.artifact`` …), the supersense.
"""
from __future__ import annotations

import os
import re
import threading
import zipfile
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple

from elmo_engine.errors import InputError

#: WordNet 3.0's lexicographer files, by number (``lexnames(5WN)``); used when no lexnames file
LEXNAMES: Tuple[str, ...] = (
    "adj.all", "adj.pert", "adv.all", "noun.Tops", "noun.act", "noun.animal", "noun.artifact",
    "noun.attribute", "noun.body", "noun.cognition", "noun.communication", "noun.event",
    "noun.feeling", "noun.food", "noun.group", "noun.location", "noun.motive", "noun.object",
    "noun.person", "noun.phenomenon", "noun.plant", "noun.possession", "noun.process",
    "noun.quantity", "noun.relation", "noun.shape", "noun.state", "noun.substance", "noun.time",
    "verb.body", "verb.change", "verb.cognition", "verb.communication", "verb.competition",
    "verb.consumption", "verb.contact", "verb.creation", "verb.emotion", "verb.motion",
    "verb.perception", "verb.possession", "verb.social", "verb.stative", "verb.weather",
    "adj.ppl",
)
SENSE_KEY_RE = re.compile(r"([^%\s]+)%([1-5]):([0-9]{2}):([0-9]{2}):([^:\s]*):([0-9]{2})?\Z")
#: part-of-speech spellings accepted by the lookups → WordNet's one-letter POS
POS_ALIASES: Dict[str, str] = {
    "n": "n", "noun": "n", "v": "v", "verb": "v", "a": "a", "adj": "a", "s": "a", "j": "a",
    "r": "r", "adv": "r", "adverb": "r", "adjective": "a",
}
_SS_TYPE_POS = {"1": "n", "2": "v", "3": "a", "4": "r", "5": "a"}
ENV_VAR = "ELMO_WORDNET"


def normalize_pos(pos: str) -> str:
    """``"NOUN"``/``"n"`` → ``"n"``, ``"ADJ"``/``"s"`` → ``"a"`` … (InputError if unknown)."""
    p = POS_ALIASES.get(pos.strip().lower())
    if p is None:
        raise InputError(f"unknown part of speech {pos!r} (expected NOUN, VERB, ADJ, ADV or n, v, "
                         f"a, s, r)")
    return p


def normalize_lemma(lemma: str) -> str:
    """WordNet's lemma spelling: lower case, spaces as underscores."""
    return "_".join(lemma.strip().lower().split())


def parse_sense_key(key: str) -> Tuple[str, str, int]:
    """``"bank%1:17:01::"`` → ``("bank", "n", 17)``: lemma, POS letter, lexicographer file."""
    m = SENSE_KEY_RE.match(key)
    if m is None:
        raise InputError(f"not a WordNet sense key: {key[:80]!r}")
    return m.group(1), _SS_TYPE_POS[m.group(2)], int(m.group(3))


class WordNet:
    """Sense inventory of WordNet 3.0 (see the module docstring for the accepted layouts).

    Parameters
    ----------
    path : a ``wordnet.zip`` (NLTK layout) or a folder holding ``index.sense``
    """

    def __init__(self, path) -> None:
        self.path = Path(path)
        sense_text, lex_text = _read_files(self.path)
        self.lexnames: Tuple[str, ...] = _parse_lexnames(lex_text, self.path) if lex_text else LEXNAMES
        # (lemma, pos letter) -> [(sense_number, key)]
        by_lemma: Dict[Tuple[str, str], List[Tuple[int, str]]] = {}
        self._info: Dict[str, Tuple[str, int, int]] = {}  # key -> (offset, sense_number, tag_cnt)
        rows = _INDEX_LINE.findall(sense_text)  # C-speed parse of every well-formed line
        if len(rows) != sum(1 for line in sense_text.splitlines() if line.strip()):
            _raise_first_bad_line(sense_text, self.path)
        for key, lemma, ss_type, offset, number, count in rows:
            n = int(number)
            self._info[key] = (offset, n, int(count))
            by_lemma.setdefault((lemma, _SS_TYPE_POS[ss_type]), []).append((n, key))
        if not self._info:
            raise InputError("index.sense is empty", path=self.path)
        self._senses: Dict[Tuple[str, str], Tuple[str, ...]] = {
            lp: tuple(k for _, k in sorted(pairs)) for lp, pairs in by_lemma.items()}

    def __contains__(self, key: object) -> bool:
        return key in self._info

    def __len__(self) -> int:
        return len(self._info)

    def candidates(self, lemma: str, pos: str) -> Tuple[str, ...]:
        """The sense keys of ``lemma`` as ``pos``, in sense-number order (empty if unknown)."""
        return self._senses.get((normalize_lemma(lemma), normalize_pos(pos)), ())

    def first_sense(self, lemma: str, pos: str) -> Optional[str]:
        """Sense 1 of ``lemma`` as ``pos`` (the most-frequent-sense baseline), or ``None``."""
        senses = self.candidates(lemma, pos)
        return senses[0] if senses else None

    def sense_number(self, key: str) -> int:
        """WordNet's sense number of ``key`` for its lemma and POS (1 = most frequent)."""
        return self._lookup(key)[1]

    def tag_count(self, key: str) -> int:
        """How often ``key`` was tagged in WordNet's semantic concordances (``tag_cnt``)."""
        return self._lookup(key)[2]

    def synset_offset(self, key: str) -> str:
        """The 8-digit synset offset of ``key`` in its ``data.<pos>`` file."""
        return self._lookup(key)[0]

    def supersense(self, key: str) -> str:
        """The lexicographer file of ``key`` (``"noun.object"`` for ``bank%1:17:01::``)."""
        lex = parse_sense_key(key)[2]
        if lex >= len(self.lexnames):
            raise InputError(f"sense key {key!r} names lexicographer file {lex}, which WordNet "
                             f"does not have")
        return self.lexnames[lex]

    def lemmas(self) -> Iterable[Tuple[str, str]]:
        """Every ``(lemma, pos letter)`` pair with at least one sense."""
        return self._senses.keys()

    def _lookup(self, key: str) -> Tuple[str, int, int]:
        try:
            return self._info[key]
        except KeyError:
            raise InputError(f"sense key {key[:80]!r} is not in WordNet ({self.path})") from None


_INDEX_LINE = re.compile(r"^[ \t]*(([^%\s]+)%([1-5]):[0-9]{2}:[0-9]{2}:[^:\s]*:(?:[0-9]{2})?)"
                         r"[ \t]+([0-9]{8})[ \t]+([0-9]+)[ \t]+([0-9]+)[ \t\r]*$", re.M)


def _raise_first_bad_line(text: str, path: Path) -> None:
    """Raise the InputError for the first line of ``index.sense`` that is not well formed."""
    for lineno, line in enumerate(text.splitlines(), 1):
        if line.strip() and _INDEX_LINE.fullmatch(line) is None:
            raise InputError("index.sense line is not 'sense_key offset sense_number tag_cnt'",
                             path=f"{path}:index.sense", line=lineno)
    raise InputError("index.sense has lines that are not 'sense_key offset sense_number tag_cnt'",
                     path=f"{path}:index.sense")


#: the largest WordNet file read (WordNet 3.0's index.sense is 7 MB, lexnames 2 kB)
MAX_WORDNET_FILE_BYTES = 32 << 20


def _zip_entry(zf: "zipfile.ZipFile", name: str, path: Path) -> str:
    """One zip entry's text, its declared size checked first and the read bounded by it."""
    info = zf.getinfo(name)
    if info.file_size > MAX_WORDNET_FILE_BYTES:
        raise InputError(f"{name} in the zip is {info.file_size:,} bytes; WordNet files are at "
                         f"most {MAX_WORDNET_FILE_BYTES:,}", path=path)
    with zf.open(info) as fh:
        data = fh.read(MAX_WORDNET_FILE_BYTES + 1)
    if len(data) > MAX_WORDNET_FILE_BYTES:
        raise InputError(f"{name} in the zip is larger than {MAX_WORDNET_FILE_BYTES:,} bytes",
                         path=path)
    return _text(data, f"{path}:{name}")


def _text(data: bytes, where) -> str:
    """A WordNet file's bytes as text; :class:`InputError` naming the file (or the zip entry)
    and the byte's place where they are not UTF-8."""
    from elmo_engine.files import utf8_text

    try:
        return utf8_text(data)
    except ValueError as e:
        raise InputError(str(e), path=where) from None


def _read_files(path: Path) -> Tuple[str, Optional[str]]:
    """The text of ``index.sense`` and of ``lexnames`` (``None`` if absent) under ``path``:
    regular files only (a FIFO or a device is refused), each at most 32 MiB, zip entries checked
    by their declared size before they are read."""
    from elmo_engine.files import read_bounded
    from elmo_engine.io.datasets.textio import check_regular_file

    try:
        if path.is_dir():
            sense = path / "index.sense"
            if not sense.exists():
                raise InputError("no index.sense here (on Debian: apt-get install "
                                 "wordnet-sense-index)", path=path)
            lex = path / "lexnames"
            for f in (sense, lex) if lex.exists() else (sense,):
                check_regular_file(f)
            return (_text(read_bounded(sense, MAX_WORDNET_FILE_BYTES), sense),
                    _text(read_bounded(lex, MAX_WORDNET_FILE_BYTES), lex)
                    if lex.exists() else None)
        check_regular_file(path)
        with zipfile.ZipFile(path) as zf:
            names = {n.rsplit("/", 1)[-1]: n for n in zf.namelist()
                     if n.count("/") <= 1 and not n.endswith("/")}
            if "index.sense" not in names:
                raise InputError("the zip holds no wordnet/index.sense", path=path)
            sense_text = _zip_entry(zf, names["index.sense"], path)
            lex_text = _zip_entry(zf, names["lexnames"], path) if "lexnames" in names else None
            return sense_text, lex_text
    except InputError:
        raise
    except (OSError, zipfile.BadZipFile, ValueError, KeyError, EOFError) as exc:
        raise InputError(f"cannot read WordNet: {exc}", path=path) from None


def _parse_lexnames(text: str, path: Path) -> Tuple[str, ...]:
    names: Dict[int, str] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) < 2 or not parts[0].isdigit():
            raise InputError("lexnames line is not 'number name pos'", path=f"{path}:lexnames",
                             line=lineno)
        names[int(parts[0])] = parts[1]
    if sorted(names) != list(range(len(names))):
        raise InputError("lexnames numbers are not 0..N-1", path=f"{path}:lexnames")
    return tuple(names[i] for i in range(len(names)))


_DEFAULT: Optional[WordNet] = None
_LOCK = threading.Lock()


def default_wordnet_path() -> Optional[Path]:
    """Where the default WordNet is: ``$ELMO_WORDNET``, else the shared data beside a source
    checkout (``../shared/data/wordnet30/nltk_data/corpora/wordnet.zip``), else
    ``/usr/share/wordnet`` when it holds ``index.sense``; ``None`` if none exists."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env)
    repo = Path(__file__).resolve().parents[3]
    shared = repo.parent / "shared" / "data" / "wordnet30" / "nltk_data" / "corpora" / "wordnet.zip"
    if shared.exists():
        return shared
    debian = Path("/usr/share/wordnet")
    if (debian / "index.sense").exists():
        return debian
    return None


def default_wordnet() -> WordNet:
    """The WordNet at :func:`default_wordnet_path`, loaded once (about a second) and cached."""
    global _DEFAULT
    with _LOCK:
        if _DEFAULT is None:
            path = default_wordnet_path()
            if path is None:
                raise InputError(f"no WordNet 3.0 found: set {ENV_VAR} to a wordnet.zip (NLTK "
                                 f"layout) or to a folder holding index.sense")
            _DEFAULT = WordNet(path)
        return _DEFAULT


def load_wordnet(path=None) -> WordNet:
    """Load WordNet from ``path``, or the default one when ``path`` is ``None``."""
    return default_wordnet() if path is None else WordNet(path)


def candidates(lemma: str, pos: str) -> Tuple[str, ...]:
    """Senses of ``lemma`` as ``pos`` in sense-number order, from the default WordNet."""
    return default_wordnet().candidates(lemma, pos)


def first_sense(lemma: str, pos: str) -> Optional[str]:
    """Sense 1 (most frequent) of ``lemma`` as ``pos``, from the default WordNet."""
    return default_wordnet().first_sense(lemma, pos)


def supersense(sense_key: str) -> str:
    """Lexicographer file (supersense) of a sense key; needs no WordNet files."""
    lex = parse_sense_key(sense_key)[2]
    if lex >= len(LEXNAMES):
        raise InputError(f"sense key {sense_key!r} names lexicographer file {lex}, which WordNet "
                         f"3.0 does not have")
    return LEXNAMES[lex]
