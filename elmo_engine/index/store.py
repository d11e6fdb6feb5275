"""The on-disk layout of a corpus index, its manifest and its shards (docs/guide/corpus-index.md).

An index folder holds::

    index.json              the manifest: format, checkpoint checksum, layers, corpus, shard size,
                            and, once finalized, the counts and the ANN library's settings
    shards/s000042.json     shard 42 is complete when this file exists: its sentences (tokens)
    shards/s000042.L1.npy   its unit-length layer-1 vectors, float16, (n_tokens, 2P), one per layer
    vectors.L1.npy          all shards' vectors joined in sentence order (memory-mapped to read)
    tokens.sqlite           sentences(id, text) and tokens(row, sentence_id, position, word, folded)
    ann.L1.usearch          the approximate nearest-neighbour index of layer 1 (:mod:`.ann`)

Every file is written atomically (:mod:`elmo_engine.atomic`); a shard's vectors are written before
its ``.json``, so a shard whose ``.json`` exists is whole. That is what makes a build resumable at
any point: a killed run leaves complete shards and at most hidden ``.part`` files, and the final
files are derived from the shards alone, so they come out the same whatever the interruptions.
Shards are also what separate processes (``torchrun`` ranks, other nodes) write and
:func:`elmo_engine.index.build.merge` joins.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from elmo_engine.atomic import atomic_path, atomic_write_text
from elmo_engine.errors import InputError
from elmo_engine.index import MANIFEST, NOT_AN_INDEX
from elmo_engine.files import parse_json_strict, read_bounded, regular_file_problem
from elmo_engine.model.tokenize import Tokenization

FORMAT = "elmo-explorer-corpus-index"
VERSION = 1
SHARDS = "shards"
TOKENS_DB = "tokens.sqlite"
#: biggest shard file read (bytes): a shard's JSON holds its sentences' tokens
MAX_JSON_BYTES = 256 << 20
#: biggest ``index.json`` read (bytes): its largest part is the list of corpus files
MAX_MANIFEST_BYTES = 16 << 20
#: what an index's vectors may have been computed in (a manifest without it: fp32)
PRECISIONS = ("fp32", "bf16", "fp16")
#: bounds of the manifest's numbers (a count of sentences or tokens, a width, a layer number)
MAX_COUNT = 1 << 40
MAX_DIM = 1 << 16
MAX_LAYER = 64
MAX_CORPUS_FILES = 100_000
#: the most an ``.npy`` header takes beyond its data (numpy's own limit is 10,000 bytes)
NPY_HEADER_MAX = 1 << 16


@dataclass(frozen=True)
class CorpusFile:
    """One input file of the corpus: its name, size and SHA-256 (a resume checks them)."""

    path: str
    size: int
    sha256: str


@dataclass(frozen=True)
class Reading:
    """How the corpus was read into sentences: part of the index's identity (a resumed build
    reads alike). Written as ``{"tokenizer": "tokenize" | "whitespace", "split_sentences",
    "skip_headers"}``; a manifest written before :class:`Tokenization` says ``"regex"`` for
    typed text, which reads as ``"tokenize"`` (so such a build resumes)."""

    tokenizer: Tokenization = Tokenization.TYPED
    split_sentences: bool = True        # paragraphs into sentences (the trainer's splitter)
    skip_headers: bool = True           # ``= … =`` lines dropped

    @staticmethod
    def from_dict(d: Dict[str, object], path: Path) -> "Reading":
        f = _Fields(d, path, "index manifest's reading")
        try:
            tokenizer = Tokenization.parse(f.text("tokenizer"))
        except ValueError:
            raise f.bad("tokenizer", "tokenize or whitespace") from None
        unknown = set(d) - {fl.name for fl in fields(Reading)}
        if unknown:
            raise f.bad(sorted(unknown)[0], "absent (not a field of the reading)")
        return Reading(tokenizer, f.flag("split_sentences"), f.flag("skip_headers"))


@dataclass
class Manifest:
    """What ``index.json`` records. ``complete`` is set last, by :func:`.build.finalize`."""

    checksum: str                      # the checkpoint's SHA-256 (options + weights)
    checkpoint: str                    # where it was loaded from (informative)
    layers: Tuple[int, ...]            # the output layers indexed (0 = token layer)
    dim: int                           # 2P, the width of one layer's vector
    shard_size: int                    # sentences per shard
    n_sentences: int
    n_tokens: int
    corpus: Tuple[CorpusFile, ...]
    reading: Reading                   # how the corpus was read (tokenizer, sentence split, …)
    complete: bool = False
    ann: Dict[str, object] = field(default_factory=dict)
    precision: str = "fp32"            # what the vectors were computed in (stored float16)
    format: str = FORMAT
    version: int = VERSION

    @property
    def n_shards(self) -> int:
        return -(-self.n_sentences // self.shard_size)

    def identity(self) -> dict:
        """What must match for a rerun to resume (or for shards to be merged)."""
        d = asdict(self)
        for k in ("complete", "ann", "checkpoint"):
            d.pop(k)
        return d

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, ensure_ascii=False)

    @staticmethod
    def from_json(text: "str | bytes", path: Path) -> "Manifest":
        """The manifest in ``text`` (strict JSON), every field checked for its type and range;
        one :class:`InputError` naming ``path`` for whatever is wrong."""
        try:
            d = parse_json_strict(text)
        except ValueError as e:
            raise InputError(f"malformed index manifest ({e})", path=path) from None
        return Manifest.from_dict(d, path)

    @staticmethod
    def from_dict(d: object, path: Path) -> "Manifest":
        if not isinstance(d, dict):
            raise InputError("malformed index manifest (not a JSON object)", path=path)
        if d.get("format") != FORMAT:
            raise InputError(f"not a corpus index (format {_shown(d.get('format'))})", path=path)
        if d.get("version") != VERSION:
            raise InputError(f"index format version {_shown(d.get('version'))} is not supported "
                             f"(this program reads version {VERSION})", path=path)
        f = _Fields(d, path, "index manifest")
        layers = f.int_list("layers", 0, MAX_LAYER)
        if not layers or len(set(layers)) != len(layers):
            raise f.bad("layers", "a list of distinct layer numbers")
        corpus = []
        for c in f.items("corpus", MAX_CORPUS_FILES):
            cf = _Fields(c, path, "index manifest's corpus entry")
            corpus.append(CorpusFile(cf.text("path"), cf.whole("size", 0, MAX_COUNT),
                                     cf.text("sha256")))
        m = Manifest(checksum=f.text("checksum"), checkpoint=f.text("checkpoint"),
                     layers=tuple(layers), dim=f.whole("dim", 1, MAX_DIM),
                     shard_size=f.whole("shard_size", 1, MAX_COUNT),
                     n_sentences=f.whole("n_sentences", 0, MAX_COUNT),
                     n_tokens=f.whole("n_tokens", 0, MAX_COUNT), corpus=tuple(corpus),
                     reading=Reading.from_dict(f.obj("reading"), path), complete=f.flag("complete", False),
                     ann=f.obj("ann", {}), precision=f.text("precision", "fp32"))
        unknown = set(d) - {fl.name for fl in fields(Manifest)}
        if unknown:
            raise InputError(f"malformed index manifest (unknown field "
                             f"{_shown(sorted(unknown)[0])})", path=path)
        if m.precision not in PRECISIONS:
            raise InputError(f"malformed index manifest (precision {m.precision!r})", path=path)
        if m.n_tokens < m.n_sentences:
            raise InputError("malformed index manifest (fewer tokens than sentences)", path=path)
        return m


def _shown(value: object) -> str:
    """A value from a file, for an error line: its ``repr``, cut to 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:59] + "…"


class _Fields:
    """Typed access to a JSON object's fields: each getter returns the value or raises one
    :class:`InputError` naming the file, the field and what it should be."""

    _MISSING = object()

    def __init__(self, d: object, path: Path, what: str):
        if not isinstance(d, dict):
            raise InputError(f"malformed {what} (not a JSON object)", path=path)
        self.d, self.path, self.what = d, path, what

    def bad(self, key: str, want: str) -> InputError:
        return InputError(f"malformed {self.what} ('{key}' must be {want}, not "
                          f"{_shown(self.d.get(key, '(missing)'))})", path=self.path)

    def get(self, key: str, default: object) -> object:
        v = self.d.get(key, default)
        if v is self._MISSING:
            raise InputError(f"malformed {self.what} (no '{key}')", path=self.path)
        return v

    def whole(self, key: str, lo: int, hi: int, default: object = _MISSING) -> int:
        v = self.get(key, default)
        if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
            raise self.bad(key, f"a whole number from {lo} to {hi}")
        return v

    def text(self, key: str, default: object = _MISSING) -> str:
        v = self.get(key, default)
        if not isinstance(v, str) or len(v) > 65536:
            raise self.bad(key, "a string")
        return v

    def flag(self, key: str, default: object = _MISSING) -> bool:
        v = self.get(key, default)
        if not isinstance(v, bool):
            raise self.bad(key, "true or false")
        return v

    def obj(self, key: str, default: object = _MISSING) -> Dict[str, object]:
        v = self.get(key, default)
        if not isinstance(v, dict):
            raise self.bad(key, "an object")
        return dict(v)

    def items(self, key: str, most: int, default: object = _MISSING) -> list:
        v = self.get(key, default)
        if not isinstance(v, list) or len(v) > most:
            raise self.bad(key, f"a list of at most {most}")
        return v

    def int_list(self, key: str, lo: int, hi: int) -> List[int]:
        v = self.items(key, hi - lo + 1)
        if not all(isinstance(x, int) and not isinstance(x, bool) and lo <= x <= hi for x in v):
            raise self.bad(key, f"a list of whole numbers from {lo} to {hi}")
        return list(v)


def read_json(path: Path, what: str = "index file", max_bytes: int = MAX_JSON_BYTES) -> dict:
    """A JSON object from the regular file ``path`` of at most ``max_bytes``, parsed strictly
    (no ``NaN``/``Infinity``); one :class:`InputError` naming the file otherwise (nesting too
    deep included)."""
    try:
        doc = parse_json_strict(read_bounded(path, max_bytes))
    except OSError as e:
        raise InputError(f"cannot read ({e.strerror or e})", path=path) from None
    except ValueError as e:
        raise InputError(f"malformed {what} ({e})", path=path) from None
    if not isinstance(doc, dict):
        raise InputError(f"malformed {what} (not a JSON object)", path=path)
    return doc


def read_manifest(folder: Path) -> Manifest:
    path = Path(folder) / MANIFEST
    if not path.exists():
        raise InputError(NOT_AN_INDEX, path=folder)
    return Manifest.from_dict(read_json(path, "index manifest", MAX_MANIFEST_BYTES), path)


def write_manifest(folder: Path, manifest: Manifest) -> None:
    atomic_write_text(Path(folder) / MANIFEST, manifest.to_json())


# ---- shards ----------------------------------------------------------------------------------
def shard_stem(folder: Path, k: int) -> Path:
    return Path(folder) / SHARDS / f"s{k:06d}"


def vectors_file(folder: Path, layer: int) -> Path:
    return Path(folder) / f"vectors.L{layer}.npy"


def shard_done(folder: Path, k: int) -> bool:
    return shard_stem(folder, k).with_suffix(".json").is_file()


def write_shard(folder: Path, k: int, first: int, sentences: Sequence[Sequence[str]],
                vectors: Dict[int, np.ndarray]) -> None:
    """Write shard ``k``: each layer's ``(n_tokens, dim)`` float16 array, then (last, marking it
    complete) its JSON with the sentences."""
    stem = shard_stem(folder, k)
    stem.parent.mkdir(parents=True, exist_ok=True)
    n_tokens = sum(len(s) for s in sentences)
    for layer, arr in vectors.items():
        assert arr.shape[0] == n_tokens and arr.dtype == np.float16, (arr.shape, arr.dtype)
        with atomic_path(Path(f"{stem}.L{layer}.npy")) as tmp:
            with open(tmp, "wb") as fh:
                np.save(fh, arr, allow_pickle=False)
    doc = {"shard": k, "first_sentence": first, "n_sentences": len(sentences),
           "n_tokens": n_tokens, "layers": sorted(vectors),
           "sentences": [list(s) for s in sentences]}
    atomic_write_text(stem.with_suffix(".json"), json.dumps(doc, ensure_ascii=False))


def read_shard(folder: Path, k: int, manifest: Manifest
               ) -> Tuple[List[List[str]], Dict[int, Path]]:
    """A complete shard's sentences and its per-layer vector files, checked against the
    manifest (sentence range, token count, layers, array shapes)."""
    stem = shard_stem(folder, k)
    path = stem.with_suffix(".json")
    f = _Fields(read_json(path, "shard"), path, "shard")
    first = k * manifest.shard_size
    want_n = min(manifest.shard_size, manifest.n_sentences - first)
    sents = f.items("sentences", manifest.shard_size)
    if (f.whole("shard", 0, MAX_COUNT) != k or f.whole("first_sentence", 0, MAX_COUNT) != first
            or f.whole("n_sentences", 0, MAX_COUNT) != want_n or len(sents) != want_n
            or sorted(f.int_list("layers", 0, MAX_LAYER)) != sorted(manifest.layers)):
        raise InputError("shard does not match the index manifest (another build's shard?)",
                         path=path)
    if not all(isinstance(s, list) and all(isinstance(w, str) for w in s) for s in sents):
        raise InputError("malformed shard ('sentences' must be lists of words)", path=path)
    n_tokens = sum(len(s) for s in sents)
    if f.whole("n_tokens", 0, MAX_COUNT) != n_tokens:
        raise InputError("shard token count does not match its sentences", path=path)
    files = {}
    for layer in manifest.layers:
        npy = Path(f"{stem}.L{layer}.npy")
        load_npy(npy, mmap=True, shape=(n_tokens, manifest.dim))
        files[layer] = npy
    return sents, files


def load_npy(path: Path, mmap: bool = True,
             shape: Optional[Tuple[int, int]] = None) -> np.ndarray:
    """An ``.npy`` array, never unpickling (object arrays are refused). The file must be a
    regular file; with ``shape`` (float16 expected) it must be no bigger than such an array plus
    its header before it is mapped, and hold exactly that shape and type."""
    problem = regular_file_problem(path)
    if problem:
        raise InputError(problem, path=path)
    if shape is not None:
        size = Path(path).stat().st_size
        most = shape[0] * shape[1] * 2 + NPY_HEADER_MAX
        if size > most:
            raise InputError(f"{size} bytes; vectors of shape {shape} float16 take at most "
                             f"{most}", path=path)
    try:
        arr = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise InputError(f"cannot read vectors ({e})", path=path) from None
    if shape is not None and (arr.shape != shape or arr.dtype != np.float16):
        raise InputError(f"vectors of shape {arr.shape} {arr.dtype}; expected "
                         f"{shape} float16", path=path)
    return arr


def index_file_names(folder: Path) -> List[str]:
    """The files of ``folder`` an index build would write or replace (``remove_index_files``
    deletes these), by name."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    found = [f.name for f in sorted(folder.glob("vectors.L*.npy")) + sorted(folder.glob("ann.L*"))]
    found += [n for n in (TOKENS_DB, SHARDS) if (folder / n).exists() or (folder / n).is_symlink()]
    return found


def refuse_foreign_files(folder: Path) -> None:
    """A folder with no ``index.json`` holding files an index writes is not an index: those
    files are the user's and are never replaced (one line naming the folder and them)."""
    found = index_file_names(folder)
    if found:
        shown = ", ".join(found[:3]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")
        raise InputError(f"holds {shown} but no {MANIFEST}: not an index this command wrote, so "
                         "nothing in it is replaced (--force neither); choose another --out",
                         path=folder)


def remove_index_files(folder: Path) -> None:
    """Empty ``folder`` of what an index build writes (``--force``); other files stay."""
    folder = Path(folder)
    shards = folder / SHARDS
    if shards.is_dir():
        for f in shards.iterdir():
            if f.name.startswith(("s", ".s")) and f.suffix in (".json", ".npy", ".part"):
                f.unlink()
    for f in list(folder.glob("vectors.L*.npy")) + list(folder.glob("ann.L*")) + [
            folder / TOKENS_DB, folder / MANIFEST]:
        if f.exists():
            os.unlink(f)
