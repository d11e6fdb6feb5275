"""The output of ``elmo-explorer embed``: the layout of AllenNLP's ``elmo`` command.

Dataset ``"i"`` holds sentence *i*'s vectors (``(L+1, n, 2P)``, or ``(n, 2P)`` for the top layer
or the layer average), float32 or float16, and ``sentence_to_index`` a JSON string mapping each
sentence to its key; as HDF5 or npz (the same keys).

Streamed, in bounded memory: sentences are read one at a time (an iterable, e.g.
:func:`elmo_engine.io.datasets.text_input.iter_text_input`), embedded in chunks of about
:data:`CHUNK_TOKENS` tokens and each chunk's vectors written before the next is read, so that
peak memory does not grow with the input (measured: ``benchmarks/bench_embed_memory.py``,
docs/performance.md). ``sentence_to_index`` — the sentences' text, which the layout asks for
as one JSON string — waits in a temporary file until the end (:class:`SentenceIndex`). The
output is written to a hidden temporary file beside the target and renamed at the end
(:mod:`elmo_engine.atomic`): a failure leaves no partial output and an existing file untouched.
"""
from __future__ import annotations

import json
import tempfile
import zipfile
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Callable, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from elmo_engine.atomic import atomic_hdf5, atomic_path, cleanup_stale_parts
from elmo_engine.errors import InputError
from elmo_engine.progress import TaskState
from elmo_engine.runtime import release_free_memory

LAYER_CHOICES = ("all", "top", "average")
DTYPES = ("float32", "float16")
#: tokens embedded and written at a time: ``CHUNK_TOKENS · (L+1) · 2P · 4`` bytes of
#: activations held (24 MiB for the demo model), whatever the input's length
CHUNK_TOKENS = 4096
#: ``embed`` warns on stderr before writing more than this many bytes (10⁹, "1 GB")
SIZE_WARNING_BYTES = 10 ** 9


class SentenceIndex:
    """``sentence_to_index`` as it grows, kept in a temporary file rather than in memory: the
    JSON object's entries ``"text": "key"`` are written out as they come, with the separators of
    :func:`json.dumps`, so that the text is what ``json.dumps`` of the dict gives when the
    sentences differ. A repeated sentence keeps both entries, and ``json.loads`` takes the last
    one, as the dict of AllenNLP's writer does."""

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile("w+", encoding="utf-8", newline="")
        self.chars = 2                                 # "{" and "}"
        self.entries = 0

    def add(self, text: str, key: str) -> None:
        entry = (", " if self.entries else "") + json.dumps(text) + ": " + json.dumps(key)
        self._file.write(entry)
        self.chars += len(entry)
        self.entries += 1

    def chunks(self, size: int = 1 << 20) -> Iterator[str]:
        """The JSON text, ``size`` characters at a time (:attr:`chars` in all)."""
        yield "{"
        self._file.seek(0)
        for piece in iter(lambda: self._file.read(size), ""):
            yield piece
        yield "}"

    def close(self) -> None:
        self._file.close()


class EmbeddingsWriter:
    """Writes datasets "0", "1", … and ``sentence_to_index`` to HDF5 or npz, one dataset at a
    time (nothing is kept: an npz is a zip archive written member by member, as
    :func:`numpy.savez` does, so it streams too; the sentence index waits in a temporary file,
    :class:`SentenceIndex`).

    ``dest`` is an open ``h5py.File`` (from :func:`atomic_hdf5`, which closes it) or, for npz, the
    temporary path to write.
    """

    def __init__(self, dest, fmt: str):
        self.fmt = fmt
        self._zip: Optional[zipfile.ZipFile] = None
        if fmt == "hdf5":
            self.fh = dest
        else:
            self._zip = zipfile.ZipFile(dest, "w", compression=zipfile.ZIP_STORED,
                                        allowZip64=True)
        self.index = SentenceIndex()

    def add(self, key: str, arr: np.ndarray) -> None:
        if self._zip is None:
            self.fh.create_dataset(key, data=arr)
        else:
            with self._zip.open(key + ".npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(arr), allow_pickle=False)

    def add_attribute(self, key: str, value: str) -> None:
        """A string beside the datasets: an HDF5 attribute, an npz member."""
        if self._zip is None:
            self.fh.attrs[key] = value
        else:
            self.add(key, np.array(value))

    def finish(self) -> None:
        """``sentence_to_index``: one string, the JSON of the sentences added to :attr:`index`."""
        if self._zip is None:
            import h5py

            ds = self.fh.create_dataset("sentence_to_index", (1,), dtype=h5py.string_dtype("utf-8"))
            ds[0] = "".join(self.index.chunks())
            return
        # a 0-d numpy unicode array is UCS-4: np.array(text) would hold 4 bytes a character
        header = {"descr": np.lib.format.dtype_to_descr(np.dtype(f"<U{self.index.chars}")),
                  "fortran_order": False, "shape": ()}
        with self._zip.open("sentence_to_index.npy", "w", force_zip64=True) as member:
            np.lib.format.write_array_header_1_0(member, header)
            for chunk in self.index.chunks():
                member.write(chunk.encode("utf-32-le"))

    def close(self) -> None:
        self.index.close()
        if self._zip is not None:
            self._zip.close()
            self._zip = None


def select_layers(arr: np.ndarray, layers: str) -> np.ndarray:
    """``all`` layers, the ``top`` one, or their ``average``."""
    if layers == "top":
        return arr[-1]
    if layers == "average":
        return arr.mean(axis=0)
    return arr


def check_choices(layers: str, dtype: str) -> None:
    """Refuse a layer choice or an output dtype this writer does not know (one line)."""
    if layers not in LAYER_CHOICES:
        raise InputError(f"unknown layer choice '{layers}' (use {', '.join(LAYER_CHOICES)})")
    if dtype not in DTYPES:
        raise InputError(f"unknown output dtype '{dtype}' (use {', '.join(DTYPES)})")


def expected_output_bytes(n_tokens: int, n_layers: int, width: int, layers: str = "all",
                          dtype: str = "float32", bytes_per_value: Optional[int] = None) -> int:
    """The vectors' size in bytes: tokens × layers kept × width (2P) × bytes per value (the
    dtype's, or ``bytes_per_value`` for text; the file adds a few hundred bytes a sentence of
    HDF5 headers and the sentence index)."""
    check_choices(layers, dtype)
    kept = n_layers if layers == "all" else 1
    per = np.dtype(dtype).itemsize if bytes_per_value is None else int(bytes_per_value)
    return int(n_tokens) * kept * int(width) * per


def size_warning(expected: int, threshold: Optional[int] = None) -> Optional[str]:
    """The warning for an output of ``expected`` bytes over ``threshold`` (default
    :data:`SIZE_WARNING_BYTES`, read when called), else None."""
    limit = SIZE_WARNING_BYTES if threshold is None else threshold
    if expected <= limit:
        return None
    return (f"the output will take about {expected / 1e9:,.1f} GB ({expected:,} bytes of "
            f"vectors, more than {limit:,}); --layers top or average keeps one layer, "
            "--dtype float16 halves it")


@dataclass(frozen=True)
class EmbedSummary:
    """What :func:`write_embeddings` wrote."""

    path: Path
    sentences: int
    tokens: int


def _chunks(sentences: Iterable[Sequence[str]], chunk_tokens: int, batch: int
            ) -> Iterator[List[Sequence[str]]]:
    """Consecutive runs of sentences of about ``chunk_tokens`` tokens, cut only after a multiple
    of ``batch`` sentences (so that stateful batches are the same as over the whole input)."""
    it = iter(sentences)
    while True:
        part: List[Sequence[str]] = []
        tokens = 0
        while tokens < chunk_tokens:
            step = list(islice(it, batch))
            part += step
            tokens += sum(len(s) for s in step)
            if len(step) < batch:
                break
        if not part:
            return
        yield part
        if tokens < chunk_tokens:
            return


def embedded(sentences: Iterable[Sequence[str]], embedder, stateful: bool = False,
             batch_size: int = 64, on_tokens: Optional[Callable[[int], None]] = None,
             chunk_tokens: Optional[int] = None
             ) -> Iterator[Tuple[Sequence[str], np.ndarray]]:
    """``(sentence, activations (L+1, n, D))`` for each of ``sentences`` (read lazily), in order,
    embedded a chunk of about ``chunk_tokens`` tokens (default :data:`CHUNK_TOKENS`) at a time:
    the next chunk is read only when the caller has taken every sentence of this one, so a
    caller that writes each sentence and drops it holds one chunk, whatever the input's length.

    Stateless by default; ``stateful`` runs the sentences in order in batches of ``batch_size``,
    each batch row keeping its LSTM state. ``on_tokens(done)`` is told the tokens done so far.
    """
    done = 0
    chunk = CHUNK_TOKENS if chunk_tokens is None else chunk_tokens
    for part in _chunks(sentences, max(1, int(chunk)), batch_size if stateful else 1):
        base = done                                # tokens before this chunk

        def on_progress(finished: int, total: int, message: str, base: int = base) -> None:
            if on_tokens is not None:
                on_tokens(base + finished)

        state = TaskState(on_progress)
        if stateful:
            arrays = embedder.embed_stateful(part, batch_size=batch_size, state=state)
        else:
            arrays = embedder.embed(part, state=state)
        for sentence, arr in zip(part, arrays):
            yield sentence, arr
        done = base + sum(len(s) for s in part)
        if on_tokens is not None:
            on_tokens(done)
        del arrays, part
        release_free_memory()                 # the chunk's buffers go back to the system


def write_embeddings(output: Path, sentences: Iterable[Sequence[str]], embedder, fmt: str,
                     layers: str = "all", stateful: bool = False, batch_size: int = 64,
                     on_tokens: Optional[Callable[[int], None]] = None, dtype: str = "float32",
                     chunk_tokens: Optional[int] = None) -> EmbedSummary:
    """Embed ``sentences`` (any iterable, read lazily) and write them to ``output`` (``fmt``
    "hdf5" or "npz"), chunk by chunk (:func:`embedded`; see the module docstring).

    Stateless by default; ``stateful`` runs the sentences in order in batches of ``batch_size``,
    each batch row keeping its LSTM state. ``on_tokens(done)`` is told the tokens done so far.
    ``dtype`` "float32" or "float16" (the vectors are computed in the embedder's precision and
    rounded when written). ``chunk_tokens``: tokens per chunk (default :data:`CHUNK_TOKENS`).

    Raises
    ------
    InputError : a bad choice, no sentences, or a sentence the embedder refuses; any error
        (cancel included) leaves no output and an existing ``output`` unchanged.
    """
    check_choices(layers, dtype)
    if fmt not in ("hdf5", "npz"):
        raise InputError(f"unknown embeddings format '{fmt}' (use hdf5 or npz)")
    output = Path(output)
    told = [0]                         # the last count passed to on_tokens

    def tell(done: int) -> None:
        told[0] = done
        if on_tokens is not None:
            on_tokens(done)

    n = 0
    cleanup_stale_parts(output.parent, target=output.name)
    with (atomic_hdf5(output) if fmt == "hdf5" else atomic_path(output)) as dest:
        writer = EmbeddingsWriter(dest, fmt)
        try:
            for sentence, arr in embedded(sentences, embedder, stateful, batch_size, tell,
                                          chunk_tokens):
                key = str(n)
                writer.add(key, np.ascontiguousarray(select_layers(arr, layers), dtype=dtype))
                writer.index.add(" ".join(sentence), key)
                n += 1
            if not n:
                raise InputError("there are no sentences to embed")
            writer.finish()
        finally:
            writer.close()
    return EmbedSummary(output, n, told[0])


__all__ = ["CHUNK_TOKENS", "DTYPES", "EmbedSummary", "EmbeddingsWriter", "LAYER_CHOICES",
           "SIZE_WARNING_BYTES", "check_choices", "embedded", "expected_output_bytes",
           "select_layers", "size_warning", "write_embeddings"]
