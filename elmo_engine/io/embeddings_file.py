"""The output of ``elmo-explorer embed``: the layout of AllenNLP's ``elmo`` command.

Dataset ``"i"`` holds line *i*'s vectors (``(L+1, n, 2P)``, or ``(n, 2P)`` for the top layer or
the layer average), and ``sentence_to_index`` a JSON string mapping each sentence to its key;
as HDF5 (streamed, dataset by dataset) or npz (the same keys). The file is written to a hidden
temporary file beside the target and renamed at the end (:mod:`elmo_engine.atomic`).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from elmo_engine.atomic import atomic_hdf5, atomic_path, cleanup_stale_parts
from elmo_engine.progress import TaskState


class EmbeddingsWriter:
    """Writes datasets "0", "1", … and ``sentence_to_index`` to HDF5 (streaming) or npz.

    ``dest`` is an open ``h5py.File`` (from :func:`atomic_hdf5`, which closes it) or, for npz, the
    temporary path to write.
    """

    def __init__(self, dest, fmt: str):
        self.fmt = fmt
        if fmt == "hdf5":
            self.fh = dest
        else:
            self.path = dest
            self.arrays: Dict[str, np.ndarray] = {}

    def add(self, key, arr) -> None:
        if self.fmt == "hdf5":
            self.fh.create_dataset(key, data=arr)
        else:
            self.arrays[key] = arr

    def finish(self, index_json: str) -> None:
        if self.fmt == "hdf5":
            import h5py

            ds = self.fh.create_dataset("sentence_to_index", (1,), dtype=h5py.string_dtype("utf-8"))
            ds[0] = index_json
        else:
            with open(self.path, "wb") as fh:
                np.savez(fh, allow_pickle=False, sentence_to_index=np.array(index_json), **self.arrays)

    def close(self) -> None:
        self.arrays = {}


def select_layers(arr: np.ndarray, layers: str) -> np.ndarray:
    """``all`` layers, the ``top`` one, or their ``average``."""
    if layers == "top":
        return arr[-1]
    if layers == "average":
        return arr.mean(axis=0)
    return arr


def write_embeddings(output: Path, sentences: Sequence[List[str]], embedder, fmt: str,
                     layers: str = "all", stateful: bool = False, batch_size: int = 64,
                     on_tokens: Optional[Callable[[int], None]] = None) -> None:
    """Embed ``sentences`` and write them to ``output`` (``fmt`` "hdf5" or "npz").

    Stateless by default; ``stateful`` runs the lines in order in batches of ``batch_size``,
    each batch row keeping its LSTM state. ``on_tokens(done)`` is told the tokens done so far.
    """
    told = [0]                         # the last count passed to on_tokens

    def tell(done: int) -> None:
        told[0] = done
        if on_tokens is not None:
            on_tokens(done)

    index: Dict[str, str] = {}
    chunk = 2000 if not stateful else batch_size * 32
    cleanup_stale_parts(output.parent, target=output.name)
    with (atomic_hdf5(output) if fmt == "hdf5" else atomic_path(output)) as dest:
        writer = EmbeddingsWriter(dest, fmt)
        try:
            for start in range(0, len(sentences), chunk):
                part = sentences[start:start + chunk]
                base = told[0]                     # tokens before this chunk

                def on_progress(done: int, total: int, message: str, base: int = base) -> None:
                    tell(base + done)

                state = TaskState(on_progress)
                if stateful:
                    arrays = embedder.embed_stateful(part, batch_size=batch_size, state=state)
                else:
                    arrays = embedder.embed(part, state=state)
                for j, arr in enumerate(arrays):
                    key = str(start + j)
                    writer.add(key, np.ascontiguousarray(select_layers(arr, layers),
                                                         dtype=np.float32))
                    index[" ".join(part[j])] = key
            writer.finish(json.dumps(index))
        finally:
            writer.close()
