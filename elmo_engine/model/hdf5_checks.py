"""Checks of a weights HDF5 file made from its metadata before anything large is read.

* :func:`lookup` finds a dataset by walking its path one link at a time and refuses soft and
  external links before HDF5 follows them (an external link could name any file: a FIFO, a
  device, a file that is not HDF5).
* :func:`check_storage` accepts a dataset only when its storage fits its shape: chunks no larger
  than the dataset, only the deflate / shuffle / fletcher32 filters, a stored size no larger than
  the data could need, and every compressed chunk decompressing to no more than its chunk's size
  (a small file cannot make HDF5 allocate gigabytes).
* :func:`check_no_extra` walks the file once (linear in its number of links, at most
  ``MAX_DEPTH`` levels and ``MAX_OBJECTS`` links) and refuses datasets the options do not
  describe.

Every problem is a :class:`~elmo_engine.errors.CheckpointError` naming the file and dataset.
"""
from __future__ import annotations

import zlib
from typing import Dict, Tuple

import numpy as np

from elmo_engine.errors import CheckpointError

#: deepest group nesting walked (the published layout is 6 levels deep)
MAX_DEPTH = 32
#: most links (groups + datasets) a weights file may hold (the largest published model: ~90)
MAX_OBJECTS = 100_000
#: most stored chunks of one compressed dataset
MAX_CHUNKS = 1 << 16
#: HDF5 filter ids: deflate (gzip), shuffle, fletcher32 — the ones h5py writes by itself
_FILTERS = {1: "deflate", 2: "shuffle", 3: "fletcher32"}


def lookup(fh, name: str, path):
    """The object at ``name`` (``None`` if a link is missing), refusing soft and external links
    on the way."""
    import h5py

    group = fh
    parts = [p for p in name.split("/") if p]
    for i, part in enumerate(parts):
        try:
            link = group.get(part, getlink=True)
        except Exception as e:
            raise CheckpointError(path, f"cannot read the file's index ({_short(e)})",
                                  dataset=name) from None
        if link is None:
            return None
        if isinstance(link, h5py.ExternalLink):
            raise CheckpointError(path, f"'{'/'.join(parts[:i + 1])}' is an external link to "
                                  f"'{_cut(link.filename)}' (stored outside this file); only "
                                  "self-contained weights files are loaded", dataset=name)
        if isinstance(link, h5py.SoftLink):
            raise CheckpointError(path, f"'{'/'.join(parts[:i + 1])}' is a soft link; only "
                                  "self-contained weights files without links are loaded",
                                  dataset=name)
        try:
            obj = group[part]
        except Exception as e:
            raise CheckpointError(path, f"cannot read the file's index ({_short(e)})",
                                  dataset=name) from None
        if i < len(parts) - 1 and not isinstance(obj, h5py.Group):
            return None
        group = obj
    return group


def check_storage(ds, name: str, path) -> None:
    """Refuse a dataset whose storage does not fit its (already checked) shape; see the module
    docstring."""
    shape = tuple(ds.shape)
    itemsize = ds.dtype.itemsize
    nbytes = int(np.prod(shape, dtype=np.int64)) * itemsize
    try:
        stored = int(ds.id.get_storage_size())
        chunks = ds.chunks
        plist = ds.id.get_create_plist()
        filters = [plist.get_filter(i)[0] for i in range(plist.get_nfilters())]
    except Exception as e:
        raise CheckpointError(path, f"cannot read the dataset's storage ({_short(e)})",
                              dataset=name) from None
    unknown = [f for f in filters if f not in _FILTERS]
    if unknown:
        raise CheckpointError(path, "dataset uses a compression filter this tool does not read",
                              dataset=name, expected="none, gzip, shuffle or fletcher32",
                              found=f"filter id {unknown[0]}")
    if chunks is None:
        if filters:
            raise CheckpointError(path, "dataset is filtered but not chunked", dataset=name)
        if stored > nbytes:
            raise CheckpointError(path, "dataset stores more bytes than its shape holds",
                                  dataset=name, expected=f"<= {nbytes} bytes", found=stored)
        return
    if len(chunks) != len(shape) or any(c > max(s, 1) for c, s in zip(chunks, shape)):
        raise CheckpointError(path, "dataset has chunks larger than the dataset itself",
                              dataset=name, expected=f"chunks within {shape}",
                              found=tuple(chunks))
    chunk_bytes = int(np.prod(chunks, dtype=np.int64)) * itemsize
    n_chunks = int(np.prod([-(-s // c) for s, c in zip(shape, chunks)], dtype=np.int64))
    # a chunk compresses to at most its size plus deflate's few bytes of overhead per 16 kB
    per_chunk = chunk_bytes + chunk_bytes // 1000 + 1024
    if stored > n_chunks * per_chunk:
        raise CheckpointError(path, "dataset stores more bytes than its shape could need",
                              dataset=name, expected=f"<= {n_chunks * per_chunk} bytes",
                              found=stored)
    if 1 in filters:
        _check_deflate_chunks(ds, name, path, chunk_bytes, per_chunk)


def _check_deflate_chunks(ds, name, path, chunk_bytes: int, per_chunk: int) -> None:
    """Decompress every stored chunk with a bound: none may grow past its chunk's size."""
    try:
        count = int(ds.id.get_num_chunks())
    except Exception as e:
        raise CheckpointError(path, f"cannot read the dataset's chunk index ({_short(e)})",
                              dataset=name) from None
    if count > MAX_CHUNKS:
        raise CheckpointError(path, "compressed dataset has too many chunks", dataset=name,
                              expected=f"<= {MAX_CHUNKS}", found=count)
    limit = chunk_bytes + 4                       # fletcher32 adds a 4-byte checksum
    for i in range(count):
        try:
            info = ds.id.get_chunk_info(i)
            if info.size > per_chunk:
                raise CheckpointError(path, "a compressed chunk is larger than its data could "
                                      "need", dataset=name, expected=f"<= {per_chunk} bytes",
                                      found=info.size)
            _mask, raw = ds.id.read_direct_chunk(info.chunk_offset)
        except CheckpointError:
            raise
        except Exception as e:
            raise CheckpointError(path, f"cannot read a compressed chunk ({_short(e)})",
                                  dataset=name) from None
        d = zlib.decompressobj()
        try:
            d.decompress(raw, limit + 1)
        except zlib.error as e:
            raise CheckpointError(path, f"corrupt compressed chunk ({_short(e)})",
                                  dataset=name) from None
        if d.unconsumed_tail:
            raise CheckpointError(path, "a compressed chunk expands beyond its chunk's size "
                                  "(a decompression bomb?)", dataset=name,
                                  expected=f"<= {limit} bytes", found="more")


def check_no_extra(fh, layout: Dict[str, Tuple[int, ...]], path) -> None:
    """Refuse datasets the options do not describe; one walk over the file's links."""
    import h5py

    expected = set(layout)
    stack = [(fh, "", 0)]
    seen = 0
    extra = []
    while stack:
        group, prefix, depth = stack.pop()
        try:
            names = list(group.keys())
        except Exception as e:
            raise CheckpointError(path, f"cannot read the file's index ({_short(e)})",
                                  dataset=prefix or "/") from None
        seen += len(names)
        if seen > MAX_OBJECTS:
            raise CheckpointError(path, "the weights file holds implausibly many groups and "
                                  "datasets", expected=f"<= {MAX_OBJECTS}", found=f"> {seen - 1}")
        for key in names:
            full = prefix + key
            try:
                link = group.get(key, getlink=True)
                if isinstance(link, (h5py.SoftLink, h5py.ExternalLink)):
                    if full in expected:
                        continue                  # lookup() refuses it with the reason
                    raise CheckpointError(path, "the weights file has links the options file "
                                          "does not describe", dataset=full)
                cls = group.get(key, getclass=True)
            except CheckpointError:
                raise
            except Exception as e:
                raise CheckpointError(path, f"cannot read the file's index ({_short(e)})",
                                      dataset=full) from None
            if cls is h5py.Dataset:
                if full not in expected:
                    extra.append(full)
            elif cls is h5py.Group:
                if depth + 1 >= MAX_DEPTH:
                    raise CheckpointError(path, "the weights file nests groups implausibly deep",
                                          dataset=_cut(full), expected=f"<= {MAX_DEPTH} levels",
                                          found="deeper")
                try:
                    stack.append((group[key], full + "/", depth + 1))
                except Exception as e:
                    raise CheckpointError(path, f"cannot read the file's index ({_short(e)})",
                                          dataset=_cut(full)) from None
    if extra:
        raise CheckpointError(path, "the weights file has datasets the options file does not "
                              "describe; the options do not match these weights",
                              dataset=_cut(sorted(extra)[0]), expected="no such dataset",
                              found=f"{len(extra)} unexpected dataset(s)")


def _cut(text, limit: int = 120) -> str:
    text = str(text)
    return text if len(text) <= limit else text[:limit] + f"… ({len(text)} characters)"


def _short(e: BaseException) -> str:
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return text[:200]
