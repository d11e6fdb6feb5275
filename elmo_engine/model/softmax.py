"""The biLM's output layer: one softmax ``p(w | h) = softmax(h Wᵀ + b)`` shared by both directions.

ELMo (Peters et al. 2018) trains a forward and a backward LM that share the token layer and this
softmax (bilm-tf ``BidirectionalLanguageModel``; ``docs/checkpoint-format.md`` §14). The LM reads
the **top layer's output** of each direction: the forward output at framed position *t* predicts
the token at *t+1*, the backward output at *t* the token at *t−1* (bilm-tf's training graph;
facebookresearch/LAMA ``lama/modules/elmo_connector.py`` does the same with the published files).

Two layouts are read into one :class:`Softmax`:

* ours (``train-lm``): ``softmax.safetensors`` (``softmax_w`` float16, ``softmax_b`` float32)
  beside ``vocab.txt``;
* the published one (AllenNLP's ``*_softmax_weights.hdf5``: datasets ``softmax/W`` (V, P) and
  ``softmax/b`` (V,)) beside its vocabulary file (``vocab-2016-09-10.txt``: one token per line,
  with ``<S>``, ``</S>`` and ``<UNK>`` somewhere).

The HDF5 file is read as the weights are (:mod:`.hdf5_checks`: no links, storage that fits the
shape, no extra datasets) and row block by row block. The original model's W is 793,471 × 512,
1.6 GB in float32: a W larger than :data:`FLOAT32_LIMIT` bytes in float32 is kept in float16
(one copy, 0.8 GB); logits are made from blocks of rows converted on the fly
(:mod:`.softmax_scan`), never from a float32 copy of W.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

import numpy as np

from elmo_engine.errors import CheckpointError
from elmo_engine.files import regular_file_problem
from elmo_engine.model.chars import BOS_TOKEN, EOS_TOKEN, UNK_TOKEN
from elmo_engine.model.hdf5_checks import check_no_extra, check_storage, lookup
from elmo_engine.model.locate import OWN_SOFTMAX, OWN_VOCAB  # noqa: F401  (imported from here)
from elmo_engine.model.locate import PUBLISHED_SOFTMAX_PATTERN as PUBLISHED_PATTERN

if TYPE_CHECKING:              # torch, h5py and safetensors load with the first softmax read
    from torch import Tensor

BOS, EOS, UNK = BOS_TOKEN, EOS_TOKEN, UNK_TOKEN
#: our own layout's format name (its file names, OWN_SOFTMAX and OWN_VOCAB, and the published
#: layout's pattern live in :mod:`.locate`, which the command line's output check reads
#: without numpy)
OWN_FORMAT = "elmo-explorer-lm-softmax"
#: a W above this many bytes in float32 is kept in float16 (the published original: 1.6 GB)
FLOAT32_LIMIT = 256 << 20
#: largest vocabulary read (the published 5.5B model's: 500,000; the original's: 793,471)
MAX_VOCAB = 4_000_000
#: largest vocabulary file read (the original's is 6.6 MB)
MAX_VOCAB_BYTES = 256 << 20
#: rows read from the HDF5 file at a time
READ_ROWS = 32768
GET_HINT = ("get it with `elmo-explorer models get NAME --with-softmax` (File → Get a published "
            "model… in the app)")


@dataclass(frozen=True)
class SoftmaxFiles:
    """Where a softmax was found: its weights and its vocabulary, and the layout."""

    weights: Path
    vocab: Path
    layout: str                      # "own" (train-lm) or "published" (AllenNLP hdf5)


class Softmax:
    """W (V, P), b (V,) and the vocabulary; ``w`` is float32 or float16 (see module docstring),
    ``b`` float32. ``index`` maps a word to its row; words outside map to ``<UNK>``."""

    def __init__(self, w: Tensor, b: Tensor, tokens: Sequence[str],
                 files: Optional[SoftmaxFiles] = None):
        if w.dim() != 2 or b.shape != (w.shape[0],) or len(tokens) != w.shape[0]:
            raise ValueError(f"softmax shapes do not fit: W {tuple(w.shape)}, b "
                             f"{tuple(b.shape)}, {len(tokens)} words")
        self.w = w                                                    # (V, P)
        self.b = b.float()                                            # (V,)
        self.tokens: List[str] = list(tokens)
        self.index: Dict[str, int] = {}
        for i, t in enumerate(self.tokens):                           # a repeat keeps its first row
            self.index.setdefault(t, i)
        missing = [t for t in (BOS, EOS, UNK) if t not in self.index]
        if missing:
            where = files.vocab if files is not None else "the vocabulary"
            raise CheckpointError(where, "the softmax vocabulary lacks "
                                  + ", ".join(missing) + " (it needs <S>, </S> and <UNK>)")
        self.files = files
        self.unk = self.index[UNK]
        self.bos = self.index[BOS]
        self.eos = self.index[EOS]

    @property
    def vocab_size(self) -> int:
        return self.w.shape[0]

    @property
    def dim(self) -> int:
        return self.w.shape[1]

    def id(self, word: str) -> int:
        """The row of ``word`` (``<UNK>``'s for a word outside the vocabulary)."""
        return self.index.get(word, self.unk)

    def ids(self, words: Sequence[str]) -> Tensor:
        """(n,) int64 row of each word (``<UNK>`` for words outside the vocabulary)."""
        import torch

        return torch.tensor([self.index.get(t, self.unk) for t in words], dtype=torch.int64)

    def nbytes(self) -> int:
        return self.w.element_size() * self.w.numel() + 4 * self.b.numel()

    def check_fits(self, output_dim: int, where) -> None:
        """:class:`CheckpointError` unless P equals the model's top-layer width."""
        if self.dim != output_dim:
            raise CheckpointError(self.files.weights if self.files else where,
                                  "the softmax does not fit the model's top layer",
                                  dataset="softmax/W", expected=f"(V, {output_dim})",
                                  found=tuple(self.w.shape))


# ---- finding the files ------------------------------------------------------------------------
class NoSoftmaxError(CheckpointError):
    """A checkpoint folder without a softmax (a command that can go on without predictions
    says how, after ``reason``: what is missing)."""

    def __init__(self, folder, reason: str):
        self.reason = reason
        super().__init__(folder, reason)


def missing_softmax_message(folder: Path) -> str:
    """What is missing beside a checkpoint: a model ``train-lm`` wrote (its ``training.json``)
    or one in the native format (``bilm.json``) keeps its softmax in ``softmax.safetensors`` +
    ``vocab.txt``; published ELMo weights carry none, and it is a separate download."""
    from elmo_engine.model.locate import NATIVE_CONFIG, TRAINING_RECORD

    own = [name for name in (TRAINING_RECORD, NATIVE_CONFIG) if (Path(folder) / name).is_file()]
    if own:
        missing = [n for n in (OWN_SOFTMAX, OWN_VOCAB) if not (Path(folder) / n).is_file()]
        return (f"no softmax: missing {' and '.join(missing)} beside {own[0]} (train-lm "
                "writes them with the model; copy them with it)")
    return (f"no softmax: published ELMo weights carry none; missing {PUBLISHED_PATTERN} and its "
            f"vocab*.txt beside the weights ({OWN_SOFTMAX} + {OWN_VOCAB} for a model written by "
            f"train-lm); {GET_HINT}")


def find_softmax(folder: Path, weights: Optional[Path] = None,
                 vocab: Optional[Path] = None) -> SoftmaxFiles:
    """The softmax files of a checkpoint folder, or the ones given. :class:`CheckpointError`
    naming the missing file (and where to get it) when there is none."""
    folder = Path(folder)
    if weights is None:
        if (folder / OWN_SOFTMAX).is_file():
            weights = folder / OWN_SOFTMAX
        else:
            found = sorted(f for f in folder.glob(PUBLISHED_PATTERN) if f.is_file())
            if not found:
                raise NoSoftmaxError(folder, missing_softmax_message(folder))
            if len(found) > 1:
                raise CheckpointError(folder, "several softmax files: " + ", ".join(
                    f.name for f in found) + "; give one with --softmax")
            weights = found[0]
    weights = Path(weights)
    layout = "own" if weights.suffix == ".safetensors" else "published"
    if vocab is None:
        where = weights.parent
        own = where / OWN_VOCAB
        cands = [own] if own.is_file() else sorted(f for f in where.glob("vocab*.txt")
                                                   if f.is_file())
        if not cands:
            raise CheckpointError(where, f"the softmax {weights.name} is here but its vocabulary "
                                  f"(vocab*.txt, one word per line) is missing; {GET_HINT}")
        vocab = cands[0] if len(cands) == 1 else _vocab_with_rows(cands, weights)
    return SoftmaxFiles(weights=weights, vocab=Path(vocab), layout=layout)


def _vocab_with_rows(cands: List[Path], weights: Path) -> Path:
    """Among several vocabulary files, the one with as many lines as W has rows."""
    rows = _rows_of(weights)
    fit = [c for c in cands if _count_lines(c) == rows]
    if len(fit) == 1:
        return fit[0]
    raise CheckpointError(weights.parent, f"cannot tell which vocabulary belongs to "
                          f"{weights.name} ({rows} rows): " + ", ".join(c.name for c in cands)
                          + "; give one with --vocab")


def _count_lines(path: Path) -> int:
    if path.stat().st_size > MAX_VOCAB_BYTES:
        return -1
    with open(path, "rb") as fh:
        data = fh.read()
    return data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)


def _rows_of(weights: Path) -> int:
    try:
        if weights.suffix == ".safetensors":
            from safetensors import safe_open

            with safe_open(str(weights), framework="pt") as fh:
                return int(fh.get_slice("softmax_w").get_shape()[0])
        import h5py

        with h5py.File(weights, "r") as fh:
            ds = lookup(fh, "softmax/W", weights)
            return int(ds.shape[0]) if ds is not None and len(ds.shape) == 2 else -1
    except CheckpointError:
        raise
    except Exception:
        return -1


# ---- reading --------------------------------------------------------------------------------
def load_softmax(folder: Path, weights: Optional[Path] = None, vocab: Optional[Path] = None,
                 output_dim: Optional[int] = None, progress=None) -> Softmax:
    """Find (:func:`find_softmax`) and read a softmax; check P against ``output_dim`` from the
    file's header, before W is read (a small compressed file of a W far too wide for the model
    is refused without allocating it)."""
    files = find_softmax(folder, weights, vocab)
    for f in (files.weights, files.vocab):
        _check_regular(f)
    tokens = read_vocabulary(files.vocab)
    if files.layout == "own":
        w, b = _read_own(files.weights, len(tokens), output_dim)
    else:
        w, b = _read_published(files.weights, len(tokens), progress, output_dim)
    soft = Softmax(w, b, tokens, files)
    if output_dim is not None:
        soft.check_fits(output_dim, folder)
    return soft


def read_vocabulary(path: Path) -> List[str]:
    """One token per line (UTF-8, a trailing CR dropped), bounded; :class:`CheckpointError`
    naming the line. A word listed twice keeps its first row (as a dictionary lookup would)."""
    path = Path(path)
    size = path.stat().st_size
    if size > MAX_VOCAB_BYTES:
        raise CheckpointError(path, "the vocabulary file is implausibly large",
                              expected=f"<= {MAX_VOCAB_BYTES} bytes", found=size)
    raw = path.read_bytes()
    from elmo_engine.files import utf8_text

    try:
        text = utf8_text(raw)
    except ValueError as e:
        raise CheckpointError(path, f"the vocabulary: {e}") from None
    tokens = text.split("\n")
    if tokens and tokens[-1] == "":
        tokens.pop()
    if len(tokens) > MAX_VOCAB:
        raise CheckpointError(path, "the vocabulary has implausibly many words",
                              expected=f"<= {MAX_VOCAB}", found=len(tokens))
    tokens = [t[:-1] if t.endswith("\r") else t for t in tokens]
    for i, t in enumerate(tokens):
        if not t.strip():
            raise CheckpointError(path, f"line {i + 1}: a vocabulary line must hold one token")
    return tokens


def _check_regular(path: Path) -> None:
    """The engine's one regular-file check (:mod:`elmo_engine.files`), as a CheckpointError."""
    problem = regular_file_problem(path)
    if problem:
        raise CheckpointError(path, f"{problem} (a softmax is read from regular files)")


def _check_width(path: Path, shape, output_dim: Optional[int], dataset: str) -> None:
    """W's shape read from the header against the model's top-layer width (None: unchecked)."""
    if output_dim is not None and (len(shape) != 2 or int(shape[1]) != output_dim):
        raise CheckpointError(path, "the softmax does not fit the model's top layer",
                              dataset=dataset, expected=f"(V, {output_dim})",
                              found=tuple(int(v) for v in shape))


def _read_own(path: Path, vocab_size: int, output_dim: Optional[int] = None
              ) -> Tuple[Tensor, Tensor]:
    """``train-lm``'s ``softmax.safetensors``: W kept as stored (float16), b float32."""
    import torch
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="pt") as fh:
            meta = fh.metadata() or {}
            if meta.get("format") != OWN_FORMAT:
                raise CheckpointError(path, "not an ELMo Explorer softmax file", dataset="format",
                                      expected=OWN_FORMAT, found=meta.get("format"))
            if set(fh.keys()) != {"softmax_w", "softmax_b"}:
                raise CheckpointError(path, "unexpected tensors",
                                      expected=["softmax_b", "softmax_w"], found=sorted(fh.keys()))
            sw, sb = fh.get_slice("softmax_w").get_shape(), fh.get_slice("softmax_b").get_shape()
            if len(sw) != 2 or sw[0] != vocab_size or list(sb) != [vocab_size]:
                raise CheckpointError(path, "the softmax does not match its vocabulary",
                                      dataset="softmax_w", expected=f"({vocab_size}, P)",
                                      found=tuple(sw))
            _check_width(path, sw, output_dim, "softmax_w")
            w, b = fh.get_tensor("softmax_w"), fh.get_tensor("softmax_b")
    except (SafetensorError, OSError, ValueError) as e:
        raise CheckpointError(path, f"cannot read the softmax ({e})") from None
    if w.dtype not in (torch.float16, torch.float32) or b.dtype != torch.float32:
        raise CheckpointError(path, "wrong dtype", dataset="softmax_w",
                              expected="float16/float32", found=str(w.dtype))
    if not (bool(torch.isfinite(w).all()) and bool(torch.isfinite(b).all())):
        raise CheckpointError(path, "the softmax holds NaN or infinite values")
    return w, b


def _read_published(path: Path, vocab_size: int, progress=None,
                    output_dim: Optional[int] = None) -> Tuple[Tensor, Tensor]:
    """AllenNLP's ``*_softmax_weights.hdf5``, checked before anything large is allocated and read
    block by block into float32 or float16 (never both)."""
    import h5py
    import torch

    with open(path, "rb") as fh:
        if fh.read(8) != b"\x89HDF\r\n\x1a\n":
            raise CheckpointError(path, "not an HDF5 file", expected="HDF5 signature")
    try:
        fh = h5py.File(path, "r")
    except Exception as e:
        raise CheckpointError(path, f"cannot open HDF5 file (truncated or corrupt: "
                              f"{str(e)[:200]})") from None
    try:
        dsw, dsb = (_dataset(fh, name, path) for name in ("softmax/W", "softmax/b"))
        if len(dsw.shape) != 2 or dsw.shape[0] != vocab_size or not 0 < dsw.shape[1] <= 65536:
            raise CheckpointError(path, "the softmax does not match its vocabulary",
                                  dataset="softmax/W", expected=f"({vocab_size}, P)",
                                  found=tuple(dsw.shape))
        _check_width(path, dsw.shape, output_dim, "softmax/W")
        if tuple(dsb.shape) != (vocab_size,):
            raise CheckpointError(path, "the bias does not match the vocabulary",
                                  dataset="softmax/b", expected=(vocab_size,),
                                  found=tuple(dsb.shape))
        layout = {"softmax/W": tuple(dsw.shape), "softmax/b": tuple(dsb.shape)}
        for name, ds in (("softmax/W", dsw), ("softmax/b", dsb)):
            check_storage(ds, name, path)
        check_no_extra(fh, layout, path)
        v, p = dsw.shape
        dtype = np.float32 if v * p * 4 <= FLOAT32_LIMIT else np.float16
        w = np.empty((v, p), dtype)                                   # the one copy
        for a in range(0, v, READ_ROWS):
            block = np.asarray(dsw[a:a + READ_ROWS], dtype=np.float32)
            if not np.isfinite(block).all():
                raise CheckpointError(path, "the softmax holds NaN or infinite values",
                                      dataset="softmax/W")
            w[a:a + len(block)] = block
            if progress is not None:
                progress(min(a + READ_ROWS, v), v, "reading the softmax")
        b = np.asarray(dsb[:], dtype=np.float32)
        if not np.isfinite(b).all():
            raise CheckpointError(path, "the softmax holds NaN or infinite values",
                                  dataset="softmax/b")
    except CheckpointError:
        raise
    except Exception as e:
        raise CheckpointError(path, f"corrupt HDF5 file ({str(e)[:200]})") from None
    finally:
        fh.close()
    return torch.from_numpy(w), torch.from_numpy(b)


def _dataset(fh, name: str, path: Path):
    import h5py

    ds = lookup(fh, name, path)                    # soft and external links refused unfollowed
    if ds is None:
        raise CheckpointError(path, "missing dataset (not a published softmax file)",
                              dataset=name)
    if not isinstance(ds, h5py.Dataset):
        raise CheckpointError(path, "expected a dataset, found a group", dataset=name)
    if ds.external or ds.is_virtual:
        raise CheckpointError(path, "dataset is stored outside this file", dataset=name)
    if ds.dtype.kind != "f":
        raise CheckpointError(path, "dataset is not floating point", dataset=name,
                              expected="float32", found=str(ds.dtype))
    return ds


def save_published_softmax(path: Path, w: np.ndarray, b: np.ndarray, tokens: Sequence[str],
                           vocab_path: Optional[Path] = None) -> None:
    """Write W, b in the published layout (``softmax/W``, ``softmax/b``) and the vocabulary
    (tests and benchmarks make synthetic softmaxes with it); atomic."""
    from elmo_engine.atomic import atomic_hdf5, atomic_write_text

    with atomic_hdf5(Path(path)) as fh:
        g = fh.create_group("softmax")
        g.create_dataset("W", data=np.asarray(w, np.float32))
        g.create_dataset("b", data=np.asarray(b, np.float32))
    if vocab_path is not None:
        atomic_write_text(Path(vocab_path), "\n".join(tokens) + "\n")
