"""Building a corpus index: embed the corpus shard by shard, then join the shards (finalize).

The corpus is read as a stream (:mod:`.corpus`: counted first, then one shard held at a time)
and embedded once, ``shard_size`` sentences at a time; each shard's unit-length vectors
of the chosen layers are written in float16 (:mod:`.store`). A rerun skips the complete shards, so
a run killed at any point (SIGKILL included) resumes where it stopped. Under ``torchrun`` each
process takes the shards ``k`` with ``k % world_size == rank`` (:mod:`.dist`); :func:`finalize`
then joins all shards into the final vector files, the SQLite token table and one ANN index per
layer, from the shards alone, so the index is the same whoever wrote them and whenever.
"""
from __future__ import annotations

import hashlib
import shutil
import sqlite3
import time
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from elmo_engine.atomic import atomic_path, cleanup_stale_parts
from elmo_engine.embed.embedder import Embedder
from elmo_engine.errors import InputError
from elmo_engine.index.ann import AnnSettings, ann_file, build_ann
from elmo_engine.io.embeddings_file import embedded
from elmo_engine.index.corpus import CorpusCount, count_corpus, shard_blocks
from elmo_engine.index.store import (CorpusFile, Manifest, Reading, SHARDS, TOKENS_DB,
                                     read_manifest, read_shard, refuse_foreign_files,
                                     remove_index_files, shard_done, shard_stem,
                                     vectors_file, write_manifest, write_shard)
from elmo_engine.progress import Rate, TaskState, check, report


def corpus_file(path: Path) -> CorpusFile:
    """A corpus file's identity: name, size, SHA-256 of its bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            h.update(chunk)
    return CorpusFile(Path(path).name, Path(path).stat().st_size, h.hexdigest())


def unit_rows(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (a zero row stays zero) and stored as float16."""
    norms = np.linalg.norm(x, axis=1, keepdims=True)              # (N, 1)
    return (x / np.maximum(norms, 1e-12)).astype(np.float16)


# ---- preparing the folder --------------------------------------------------------------------
def prepare(folder: Path, wanted: Manifest, force: bool = False) -> Tuple[Manifest, bool]:
    """Make ``folder`` ready for ``wanted``: a new index, or the same one to resume.

    Returns the manifest to use and whether the index is already complete. An index of another
    model is refused (its checksum differs); so is one of another corpus or settings, unless
    ``force``, which removes the old index files first. A folder without ``index.json`` that
    holds files an index writes (``tokens.sqlite``, ``vectors.L1.npy`` …: the user's own) is
    refused, ``force`` or not: only an index is ever replaced (issue 38).
    """
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise InputError("exists and is not a folder; give a folder for the index", path=folder)
    if not (folder / "index.json").exists():
        refuse_foreign_files(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if (folder / "index.json").exists():
        old = read_manifest(folder)
        if force:
            remove_index_files(folder)
        elif old.checksum != wanted.checksum:
            raise InputError(
                f"was built with another model (checksum {old.checksum[:12]}…, this one is "
                f"{wanted.checksum[:12]}…); pass --force to rebuild it or choose another --out",
                path=folder)
        elif old.identity() != wanted.identity():
            diff = [k for k, v in wanted.identity().items() if old.identity().get(k) != v]
            raise InputError(f"holds an index of another corpus or settings ({', '.join(diff)}"
                             "); pass --force to rebuild it or choose another --out", path=folder)
        else:
            cleanup_stale_parts(folder / SHARDS, min_age_s=0.0)
            return old, old.complete
    write_manifest(folder, wanted)
    return wanted, False


def resumed_layers(out: Path, checksum: str) -> Optional[tuple]:
    """The layers of the index build in ``out`` of the model with ``checksum``, when there is
    one: a rerun without ``--layer`` resumes it with the layers it was begun with, even where
    the default has changed (it was 1,2 whatever the model until 2026-12-08). None when there
    is no such build (no folder, no manifest, another model, an unreadable manifest: the
    checks that follow say so)."""
    if not (Path(out) / "index.json").is_file():
        return None
    try:
        old = read_manifest(out)
    except InputError:
        return None
    return tuple(old.layers) if old.checksum == checksum else None


def check_model(folder: Path, checksum: str) -> Manifest:
    """The manifest of ``folder``, refused if it was built with another model."""
    m = read_manifest(folder)
    if m.checksum != checksum:
        raise InputError(f"was built with another model (checksum {m.checksum[:12]}…; the "
                         f"loaded one is {checksum[:12]}…); load that checkpoint or rebuild "
                         "the index", path=folder)
    return m


# ---- embedding -------------------------------------------------------------------------------
def embed_shards(folder: Path, sentences: Iterable[Sequence[str]], manifest: Manifest,
                 embedder: Embedder, rank: int = 0, world: int = 1,
                 state: Optional[TaskState] = None, count: Optional[CorpusCount] = None,
                 ann: Optional[AnnSettings] = None) -> int:
    """Embed and write this process's missing shards; returns how many it wrote.

    ``sentences`` is read once, in order (a list, or a :class:`~.corpus.CorpusReader` that
    streams the files): one shard is held at a time. ``count`` (:func:`~.corpus.count_corpus`
    of the same sentences) gives each shard's tokens for the progress; without it a first
    pass counts them. With ``ann`` (the graphs' settings) the time left covers the graph build
    that follows: after the first shard, a small graph of its vectors is built and timed
    (:func:`~.ann.estimate_graph_seconds`)."""
    folder = Path(folder)
    size = manifest.shard_size
    if count is None or count.shard_size != size:
        count = count_corpus(sentences, size)
    if (count.n_sentences, count.n_tokens) != (manifest.n_sentences, manifest.n_tokens):
        raise InputError(f"the corpus holds {count.n_sentences} sentences ({count.n_tokens} "
                         f"tokens) but the index was begun on {manifest.n_sentences} "
                         f"({manifest.n_tokens}): did a corpus file change?", path=folder)
    mine = [k for k in range(manifest.n_shards) if k % world == rank]
    total = sum(count.shard_tokens[k] for k in mine)
    missing = {k for k in mine if not shard_done(folder, k)}
    done = total - sum(count.shard_tokens[k] for k in missing)
    rate = Rate(total, done)
    report(state, done, total, "resuming" if done else "embedding")
    written = 0
    for k, block in shard_blocks(sentences, size, missing):
        check(state)
        # a chunk of sentences at a time, keeping only the chosen layers' unit rows in float16:
        # a shard costs 2 bytes a value of what is stored, not 4·(L+1) of the activations
        parts: Dict[int, List[np.ndarray]] = {layer: [] for layer in manifest.layers}
        for _, arr in embedded(block, embedder):                 # (L+1, n_i, D)
            for layer in manifest.layers:
                parts[layer].append(unit_rows(arr[layer]))
        vectors = {layer: np.concatenate(rows) for layer, rows in parts.items()}
        del parts                                                 # each (n_tokens, D) float16
        write_shard(folder, k, k * size, block, vectors)
        if ann is not None and written == 0 and rank == 0:
            from elmo_engine.index.ann import estimate_graph_seconds

            timing = time.monotonic()
            rate.extra_s = len(manifest.layers) * estimate_graph_seconds(
                vectors[manifest.layers[-1]], manifest.n_tokens, ann)
            rate.t0 += time.monotonic() - timing     # the timing is no embedding time
        written += 1
        done += count.shard_tokens[k]
        report(state, done, total, rate.message(done)
               + (", the graphs included" if rate.extra_s else ""))
    return written


def missing_shards(folder: Path, manifest: Manifest) -> List[int]:
    return [k for k in range(manifest.n_shards) if not shard_done(folder, k)]


# ---- joining ---------------------------------------------------------------------------------
def finalize(folder: Path, settings: AnnSettings = AnnSettings(),
             state: Optional[TaskState] = None,
             on_stage: Callable[[str], None] = lambda s: None,
             keep_shards: bool = False) -> Manifest:
    """Join the shards of ``folder`` into the final files and mark the index complete; then
    remove the shards (they hold the same vectors again) unless ``keep_shards``."""
    folder = Path(folder)
    m = read_manifest(folder)
    missing = missing_shards(folder, m)
    if missing:
        shown = ", ".join(str(k) for k in missing[:8]) + (" …" if len(missing) > 8 else "")
        raise InputError(f"{len(missing)} of {m.n_shards} shards are missing ({shown}); run the "
                         "index command again to embed them, or merge the folders that hold "
                         "them with --merge", path=folder)
    # one shard's sentences at a time: checked here, read again for the token table
    files: List[Dict[int, Path]] = []
    n_tokens = 0
    for k in range(m.n_shards):
        sents, shard_files = read_shard(folder, k, m)
        n_tokens += sum(len(s) for s in sents)
        files.append(shard_files)
        del sents
    if n_tokens != m.n_tokens:
        raise InputError(f"the shards hold {n_tokens} tokens, the manifest says {m.n_tokens}",
                         path=folder)
    on_stage("joining the vectors")
    for layer in m.layers:
        check(state)
        with atomic_path(vectors_file(folder, layer)) as tmp:
            out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float16,
                                            shape=(n_tokens, m.dim))   # (N, D)
            row = 0
            for shard_files in files:
                part = np.load(shard_files[layer], mmap_mode="r", allow_pickle=False)
                out[row:row + len(part)] = part
                row += len(part)
            out.flush()
            del out
    on_stage("writing the token table")
    write_tokens_db(folder / TOKENS_DB,
                    (s for k in range(m.n_shards) for s in read_shard(folder, k, m)[0]))
    for layer in m.layers:
        on_stage(f"building the nearest-neighbour index of layer {layer}")
        vecs = np.load(vectors_file(folder, layer), mmap_mode="r", allow_pickle=False)
        build_ann(vecs, ann_file(folder, layer), settings, state)
    m.complete = True
    m.ann = settings.to_dict()
    write_manifest(folder, m)
    if not keep_shards:
        for k in range(m.n_shards):
            stem = shard_stem(folder, k)
            stem.with_suffix(".json").unlink(missing_ok=True)      # first: the shard is gone
            for layer in m.layers:
                Path(f"{stem}.L{layer}.npy").unlink(missing_ok=True)
    return m


def write_tokens_db(target: Path, sentences: Iterable[Sequence[str]]) -> None:
    """The token table: one row per token (its row in the vector files), and the sentences
    (taken one at a time, written in batches)."""
    with atomic_path(target) as tmp:
        tmp.unlink()
        con = sqlite3.connect(tmp)
        try:
            con.executescript(
                "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;"
                "CREATE TABLE sentences (id INTEGER PRIMARY KEY, first_row INTEGER NOT NULL,"
                " n_tokens INTEGER NOT NULL, text TEXT NOT NULL);"
                "CREATE TABLE tokens (row INTEGER PRIMARY KEY, sentence_id INTEGER NOT NULL,"
                " position INTEGER NOT NULL, word TEXT NOT NULL, folded TEXT NOT NULL);")
            row = 0
            sent_rows: List[tuple] = []
            tok_rows: List[tuple] = []
            for sid, s in enumerate(sentences):
                sent_rows.append((sid, row, len(s), " ".join(s)))
                tok_rows.extend((row + i, sid, i, w, w.casefold()) for i, w in enumerate(s))
                row += len(s)
                if len(tok_rows) > 200_000:
                    _flush(con, sent_rows, tok_rows)
            _flush(con, sent_rows, tok_rows)
            con.executescript("CREATE INDEX tokens_folded ON tokens(folded);"
                              "CREATE INDEX tokens_word ON tokens(word);")
            con.commit()
        finally:
            con.close()


def _flush(con: sqlite3.Connection, sent_rows: list, tok_rows: list) -> None:
    con.executemany("INSERT INTO sentences VALUES (?,?,?,?)", sent_rows)
    con.executemany("INSERT INTO tokens VALUES (?,?,?,?,?)", tok_rows)
    sent_rows.clear()
    tok_rows.clear()


def merge(parts: Sequence[Path], out: Path, force: bool = False) -> Manifest:
    """Copy the shards of index folders ``parts`` (other nodes' outputs) into ``out``; all must
    be of the same model, corpus and settings. ``out`` may be one of the parts."""
    out = Path(out)
    manifests = [(Path(p), read_manifest(Path(p))) for p in parts]
    if not manifests:
        m = read_manifest(out)
    else:
        m = manifests[0][1]
        for p, other in manifests[1:]:
            if other.identity() != m.identity():
                raise InputError("is an index of another model, corpus or settings than "
                                 f"{manifests[0][0]}; only parts of one build can be merged",
                                 path=p)
        m.complete = False
        m.ann = {}
        prepare(out, m, force=force)
        for p, _ in manifests:
            if p.resolve() == out.resolve():
                continue
            for k in range(m.n_shards):
                if shard_done(p, k) and not shard_done(out, k):
                    read_shard(p, k, m)                               # checked before copying
                    src, dst = shard_stem(p, k), shard_stem(out, k)
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    for layer in m.layers:
                        with atomic_path(Path(f"{dst}.L{layer}.npy")) as tmp:
                            shutil.copyfile(f"{src}.L{layer}.npy", tmp)
                    with atomic_path(dst.with_suffix(".json")) as tmp:   # last: marks it whole
                        shutil.copyfile(src.with_suffix(".json"), tmp)
    return read_manifest(out)


def new_manifest(model, checkpoint: str, count: CorpusCount, layers: Sequence[int],
                 corpus: Sequence[Path], reading: Reading,
                 precision: str = "fp32") -> Manifest:
    """The manifest of an index of the sentences ``count`` counted (read from the files
    ``corpus`` as ``reading`` says) by ``model``, in shards of ``count.shard_size``, embedded in
    ``precision`` (part of the identity: a build is resumed in the same one)."""
    return Manifest(checksum=model.info.checksum, checkpoint=str(checkpoint),
                    layers=tuple(sorted(set(int(v) for v in layers))),
                    dim=2 * model.opts.output_dim, shard_size=int(count.shard_size),
                    n_sentences=count.n_sentences, n_tokens=count.n_tokens,
                    corpus=tuple(corpus_file(p) for p in corpus), reading=reading,
                    precision=precision)


def build_index(folder: Path, sentences: Iterable[Sequence[str]], manifest: Manifest,
                embedder: Embedder, settings: AnnSettings = AnnSettings(),
                state: Optional[TaskState] = None, force: bool = False,
                count: Optional[CorpusCount] = None) -> Manifest:
    """Build (or resume) an index in one process: what the app's worker calls. Progress goes
    to ``state`` (tokens while embedding, vectors while building the graphs); a cancel stops
    between shards, and the next call resumes."""
    if embedder.checksum != manifest.checksum:
        raise InputError("the embedder's model is not the manifest's", path=folder)
    manifest, complete = prepare(folder, manifest, force)
    if complete:
        return manifest
    embed_shards(folder, sentences, manifest, embedder, 0, 1, state, count, settings)
    return finalize(folder, settings, state,
                    on_stage=lambda s: report(state, 0, 1, s))
