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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import numpy as np

from elmo_engine.atomic import atomic_path, atomic_write_text
from elmo_engine.errors import InputError

FORMAT = "elmo-explorer-corpus-index"
VERSION = 1
MANIFEST = "index.json"
SHARDS = "shards"
TOKENS_DB = "tokens.sqlite"
#: biggest manifest / shard file read (bytes): a shard's JSON holds its sentences' tokens
MAX_JSON_BYTES = 256 << 20
#: what an index's vectors may have been computed in (a manifest without it: fp32)
PRECISIONS = ("fp32", "bf16", "fp16")


@dataclass(frozen=True)
class CorpusFile:
    """One input file of the corpus: its name, size and SHA-256 (a resume checks them)."""

    path: str
    size: int
    sha256: str


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
    reading: Dict[str, object]         # how the corpus was read (tokenizer, sentence split, …)
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
    def from_json(text: str, path: Path) -> "Manifest":
        try:
            d = json.loads(text)
            if d.get("format") != FORMAT:
                raise InputError(f"not a corpus index (format {d.get('format')!r})", path=path)
            if d.get("version") != VERSION:
                raise InputError(f"index format version {d.get('version')} is not supported "
                                 f"(this program reads version {VERSION})", path=path)
            d["layers"] = tuple(int(x) for x in d["layers"])
            d["corpus"] = tuple(CorpusFile(**c) for c in d["corpus"])
            m = Manifest(**d)
        except InputError:
            raise
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            raise InputError(f"malformed index manifest ({e})", path=path) from None
        if m.shard_size < 1 or m.n_sentences < 0 or m.dim < 1:
            raise InputError("malformed index manifest (sizes)", path=path)
        if m.precision not in PRECISIONS:
            raise InputError(f"malformed index manifest (precision {m.precision!r})", path=path)
        return m


def read_json(path: Path) -> dict:
    """A bounded JSON read: one clear error naming the file."""
    try:
        size = path.stat().st_size
        if size > MAX_JSON_BYTES:
            raise InputError(f"{size} bytes; more than this index ever writes", path=path)
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise InputError(f"cannot read ({e})", path=path) from None


def read_manifest(folder: Path) -> Manifest:
    path = Path(folder) / MANIFEST
    if not path.is_file():
        raise InputError("is not a corpus index (no index.json); build one with "
                         "'elmo-explorer index'", path=folder)
    try:
        size = path.stat().st_size
        if size > MAX_JSON_BYTES:
            raise InputError(f"{size} bytes; too big for an index manifest", path=path)
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read ({e})", path=path) from None
    return Manifest.from_json(text, path)


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
    doc = read_json(path)
    first = k * manifest.shard_size
    want_n = min(manifest.shard_size, manifest.n_sentences - first)
    sents = doc.get("sentences")
    if (doc.get("shard") != k or doc.get("first_sentence") != first
            or doc.get("n_sentences") != want_n or not isinstance(sents, list)
            or len(sents) != want_n or sorted(doc.get("layers", [])) != sorted(manifest.layers)):
        raise InputError("shard does not match the index manifest (another build's shard?)",
                         path=path)
    n_tokens = sum(len(s) for s in sents)
    if doc.get("n_tokens") != n_tokens:
        raise InputError("shard token count does not match its sentences", path=path)
    files = {}
    for layer in manifest.layers:
        f = Path(f"{stem}.L{layer}.npy")
        arr = load_npy(f, mmap=True)
        if arr.shape != (n_tokens, manifest.dim) or arr.dtype != np.float16:
            raise InputError(f"vectors of shape {arr.shape} {arr.dtype}; expected "
                             f"({n_tokens}, {manifest.dim}) float16", path=f)
        files[layer] = f
    return sents, files


def load_npy(path: Path, mmap: bool = True) -> np.ndarray:
    """An ``.npy`` array, never unpickling (object arrays are refused)."""
    try:
        return np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise InputError(f"cannot read vectors ({e})", path=path) from None


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
