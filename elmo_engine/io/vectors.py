"""Export ELMo vectors of sentences (or of chosen tokens) as npz, HDF5, projector TSV or CSV.

Layouts (``docs/guide/workspaces.md`` has the full description):

* **all sentences, npz / HDF5** — the AllenNLP ``elmo`` command's layout
  (``docs/checkpoint-format.md`` §11.1): one float32 dataset per sentence named by its 0-based
  index (``"0"``, ``"1"``, …), shape ``(L+1, n, 2P)`` for ``each`` or ``(n, 2P)`` otherwise, and
  ``sentence_to_index``: a JSON object mapping each sentence's text (tokens joined by one space)
  to its key (for duplicate sentences the last one wins, as in AllenNLP).
* **chosen tokens, npz / HDF5** — ``vectors`` ``(n, [L+1,] 2P)``, ``sentence`` and ``token``
  (int64 indices) and ``word`` (UTF-8 strings).
* **TSV** — for the TensorBoard embedding projector: ``vectors.tsv`` (no header) and
  ``metadata.tsv`` (a header row, because it has more than one column); with ``each`` one
  ``vectors_layer<k>.tsv`` per layer and one ``metadata.tsv``. A target without an extension is
  a folder holding them; a target ``NAME.tsv`` is the vectors file itself, with
  ``NAME.metadata.tsv`` beside it (``each``: ``NAME.layer<k>.tsv``)
  (:mod:`elmo_engine.io.vectors_tsv`).
* **CSV** — one row per token (and per layer for ``each``): ``sentence, token, word, layer,
  d0 … d<2P-1>``.

Every file is written whole beside its target and renamed into place (a TSV folder is renamed
into place as a whole); an existing target is refused unless ``overwrite=True``. A failure to
write (disk full, no permission) raises :class:`ExportError` naming the path and leaves nothing
behind.
"""
from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, List, Optional, Sequence, Tuple

import numpy as np

from elmo_engine.atomic import atomic_hdf5, atomic_path
from elmo_engine.errors import ElmoError, InputError
from elmo_engine.progress import TaskState, check, report

FORMATS = ("npz", "hdf5", "tsv", "csv")
LAYER_MODES = ("each", "top", "average", "mix")
DTYPES = ("float32", "float16")
FORMAT_BY_SUFFIX = {".npz": "npz", ".hdf5": "hdf5", ".h5": "hdf5", ".csv": "csv", ".tsv": "tsv"}

_REASONS = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is exceeded",
            errno.EACCES: "permission denied", errno.EPERM: "permission denied",
            errno.EROFS: "the file system is read-only", errno.ENAMETOOLONG: "the name is too long",
            errno.ENOENT: "the folder does not exist"}


class ExportError(ElmoError):
    """A file could not be written; ``path`` names it. Nothing half-written was left behind."""

    def __init__(self, path, message: str):
        self.path = str(path)
        super().__init__(f"{self.path}: {message}")


class TargetExistsError(ExportError):
    """The target exists and overwriting was not allowed (the GUI asks, then retries)."""

    def __init__(self, path):
        super().__init__(path, "already exists; choose another name or allow overwriting")


def swap_in_folder(staging: Path, target: Path, overwrite: bool) -> None:
    """Rename a filled staging folder into place as a whole; an existing ``target`` is moved
    aside first (``TargetExistsError`` without ``overwrite``) and put back if the rename fails."""
    old: Optional[Path] = None
    if target.exists():
        if not overwrite:
            raise TargetExistsError(target)
        old = target.with_name(f".{target.name}.old-{os.getpid()}-{time.monotonic_ns()}")
        os.replace(target, old)
    try:
        os.replace(staging, target)
    except BaseException:
        if old is not None and not target.exists():
            os.replace(old, target)                          # put the previous one back
        raise
    if old is not None:
        if old.is_dir():
            shutil.rmtree(old, ignore_errors=True)
        else:
            old.unlink(missing_ok=True)


def describe_os_error(e: OSError) -> str:
    """A short reason for a failed write: "the disk is full", "permission denied", …"""
    reason = _REASONS.get(e.errno or -1) or e.strerror or str(e)
    return f"cannot write ({reason}); nothing was written"


@contextlib.contextmanager
def writing(path) -> Iterator[None]:
    """Turn an ``OSError`` (or an h5py error wrapping one) raised in the block into ExportError."""
    try:
        yield
    except ElmoError:
        raise
    except OSError as e:
        raise ExportError(path, describe_os_error(e)) from e


def refuse_existing(path, overwrite: bool) -> None:
    if not overwrite and (Path(path).exists() or Path(path).is_symlink()):
        raise TargetExistsError(path)


# ---- layer choice -------------------------------------------------------------------------
@dataclass(frozen=True)
class LayerChoice:
    """Which vectors to write per token.

    Parameters
    ----------
    mode : "each" (every layer, 0 … L), "top" (layer L), "average" (plain mean of the layers) or
        "mix" (``gamma · Σ_k w_k h_k``)
    weights : for "mix": one weight per layer; normalised weights (summing to 1 after
        normalisation, non-negative) or, with ``pre_softmax``, ScalarMix scalars ``s_k``
    gamma : the mix's scale γ
    pre_softmax : ``weights`` are the scalars ``s`` of a ScalarMix (``w = softmax(s)``)
    """

    mode: str = "each"
    weights: Optional[Tuple[float, ...]] = None
    gamma: float = 1.0
    pre_softmax: bool = False

    def validate(self, n_layers: int) -> None:
        if self.mode not in LAYER_MODES:
            raise InputError(f"unknown layer choice '{self.mode}' (use {', '.join(LAYER_MODES)})")
        if self.mode != "mix":
            return
        if self.weights is None or len(self.weights) != n_layers:
            got = 0 if self.weights is None else len(self.weights)
            raise InputError(f"the mix needs one weight per layer: {n_layers} expected, got {got}")
        w = np.asarray(self.weights, dtype=np.float64)
        if not np.all(np.isfinite(w)) or not np.isfinite(self.gamma):
            raise InputError("mix weights and gamma must be finite numbers")
        if not self.pre_softmax and (np.any(w < 0) or w.sum() <= 0):
            raise InputError("mix weights must be non-negative and not all zero")

    def label(self) -> str:
        if self.mode != "mix":
            return self.mode
        return "mix(" + ",".join(f"{w:g}" for w in self.normalised()) + f";gamma={self.gamma:g})"

    def normalised(self) -> np.ndarray:
        """The mix weights as they are applied (sum 1), float64."""
        from elmo_engine.model.mix import softmax_weights

        w = np.asarray(self.weights, dtype=np.float64)
        return softmax_weights(w) if self.pre_softmax else w / w.sum()

    def apply(self, arr: np.ndarray) -> np.ndarray:
        """``(L+1, n, D)`` → ``(L+1, n, D)`` for "each", else ``(n, D)`` float32."""
        if self.mode == "each":
            return np.ascontiguousarray(arr, dtype=np.float32)
        if self.mode == "top":
            return np.ascontiguousarray(arr[-1], dtype=np.float32)
        if self.mode == "average":
            return arr.astype(np.float64).mean(axis=0).astype(np.float32)
        from elmo_engine.model.mix import scalar_mix_numpy

        w = self.normalised()
        with np.errstate(divide="ignore"):
            s = np.log(w)                                   # softmax(log w) = w; zeros → -inf
        return scalar_mix_numpy(arr, s, self.gamma).astype(np.float32)   # (n, D)


@dataclass(frozen=True)
class ExportSummary:
    """What an export wrote."""

    path: Path
    fmt: str
    n_sentences: int
    n_vectors: int
    files: Tuple[Path, ...]


def output_files(path, fmt: str, layers: "Optional[LayerChoice]" = None, n_layers: Optional[int] = None
                 ) -> List[Path]:
    """The files an export to ``path`` writes (for ``each`` to ``NAME.tsv`` without
    ``n_layers``: the per-layer files already there), so that a caller can refuse existing ones
    before any work."""
    path = Path(path)
    if fmt != "tsv":
        return [path]
    from elmo_engine.io.vectors_tsv import tsv_files

    return tsv_files(path, layers or LayerChoice(), n_layers)


def format_for(path, fmt: Optional[str] = None) -> str:
    """The format named, else guessed from the extension (a path without one → TSV folder)."""
    if fmt is not None:
        if fmt not in FORMATS:
            raise InputError(f"unknown export format '{fmt}' (use {', '.join(FORMATS)})")
        return fmt
    suffix = Path(path).suffix.lower()
    if suffix in FORMAT_BY_SUFFIX:
        return FORMAT_BY_SUFFIX[suffix]
    if not suffix:
        return "tsv"
    raise InputError(f"cannot tell the format from '{suffix}': use .npz, .hdf5, .csv or a "
                     "folder (TSV), or name the format", path=path)


# ---- the export ---------------------------------------------------------------------------
def export_vectors(path, tokens: Sequence[Sequence[str]], activations: Sequence[np.ndarray],
                   fmt: Optional[str] = None, layers: LayerChoice = LayerChoice(),
                   refs: Optional[Sequence[Tuple[int, int]]] = None, overwrite: bool = False,
                   state: Optional[TaskState] = None, dtype: str = "float32") -> ExportSummary:
    """Write vectors of every sentence, or of the tokens ``refs`` = [(sentence, token), …].

    Parameters
    ----------
    path : target file (npz, hdf5, csv) or folder (tsv)
    tokens : tokens per sentence
    activations : per sentence ``(L+1, n, 2P)`` float32 (as the embedder returns them)
    fmt : "npz", "hdf5", "tsv" or "csv" (default: from the extension)
    layers : the layer choice
    refs : only these tokens (a selection); None for every sentence
    overwrite : replace an existing target
    state : progress and cancel
    dtype : the vectors' type in npz and hdf5: "float32" (default) or "float16" (rounded when
        written; TSV and CSV are text and take float32 only)

    Raises
    ------
    InputError : inconsistent input or bad choices; TargetExistsError; ExportError on write failure
    """
    path = Path(path)
    fmt = format_for(path, fmt)
    if len(tokens) != len(activations):
        raise InputError(f"{len(tokens)} token lists for {len(activations)} activations")
    if not tokens:
        raise InputError("there are no sentences to export")
    for i, (t, a) in enumerate(zip(tokens, activations)):
        if a is None or a.ndim != 3 or a.shape[1] != len(t):
            shape = None if a is None else a.shape
            raise InputError(f"sentence {i}: activations {shape} do not match its {len(t)} tokens")
    if dtype not in DTYPES:
        raise InputError(f"unknown vector dtype '{dtype}' (use {', '.join(DTYPES)})")
    if dtype != "float32" and fmt not in ("npz", "hdf5"):
        raise InputError(f"--dtype {dtype} applies to npz and hdf5 outputs; {fmt} is text")
    n_layers = activations[0].shape[0]
    layers.validate(n_layers)
    refs = None if refs is None else [_check_ref(r, tokens) for r in refs]
    if refs is not None and not refs:
        raise InputError("the selection is empty: no tokens to export")
    refuse_existing(path, overwrite)
    with writing(path):
        if fmt == "tsv":
            from elmo_engine.io.vectors_tsv import write_tsv

            files = write_tsv(path, tokens, activations, layers, refs, state, overwrite)
        else:
            if fmt == "hdf5":                    # HDF5 through the crash-safe writer
                with atomic_hdf5(path) as fh:
                    _write_hdf5(fh, tokens, activations, layers, refs, state, dtype)
            elif fmt == "npz":
                with atomic_path(path) as tmp:
                    _write_npz(tmp, tokens, activations, layers, refs, state, dtype)
            else:
                with atomic_path(path) as tmp:
                    _write_csv(tmp, tokens, activations, layers, refs, state)
            files = [path]
    n_vec = len(refs) if refs is not None else sum(len(t) for t in tokens)
    n_sent = len({s for s, _ in refs}) if refs is not None else len(tokens)
    return ExportSummary(path, fmt, n_sent, n_vec, tuple(files))


def _check_ref(ref, tokens) -> Tuple[int, int]:
    s, t = int(ref[0]), int(ref[1])
    if not (0 <= s < len(tokens) and 0 <= t < len(tokens[s])):
        raise InputError(f"the selection names token {t} of sentence {s}, which does not exist")
    return s, t


def _rows(tokens, activations, layers: LayerChoice, refs, state):
    """Yield ``(sentence, token, word, vectors)`` with vectors ``(K, D)`` or ``(D,)`` per token."""
    if refs is not None:
        by_sentence: dict = {}
        for s, t in refs:
            by_sentence.setdefault(s, []).append(t)
        cache = {}
        for k, (s, t) in enumerate(refs):
            if s not in cache:
                check(state)
                cache = {s: layers.apply(activations[s][:, by_sentence[s]])}
                order = {tt: j for j, tt in enumerate(by_sentence[s])}
            arr = cache[s]
            j = order[t]
            yield s, t, tokens[s][t], (arr[:, j] if layers.mode == "each" else arr[j])
            report(state, k + 1, len(refs), "writing vectors")
        return
    for s, (toks, act) in enumerate(zip(tokens, activations)):
        check(state)
        arr = layers.apply(act)
        for t, word in enumerate(toks):
            yield s, t, word, (arr[:, t] if layers.mode == "each" else arr[t])
        report(state, s + 1, len(tokens), "writing vectors")


def _sentence_index(tokens) -> str:
    return json.dumps({" ".join(t): str(i) for i, t in enumerate(tokens)}, ensure_ascii=False)


def _selection_arrays(tokens, activations, layers, refs, state, dtype: str = "float32"):
    rows = list(_rows(tokens, activations, layers, refs, state))
    vectors = np.stack([r[3] for r in rows]).astype(dtype)               # (n, [K,] D)
    return {"vectors": vectors,
            "sentence": np.array([r[0] for r in rows], np.int64),
            "token": np.array([r[1] for r in rows], np.int64),
            "word": np.array([r[2] for r in rows], dtype=str)}


def _write_npz(tmp: Path, tokens, activations, layers, refs, state, dtype: str) -> None:
    if refs is not None:
        arrays = _selection_arrays(tokens, activations, layers, refs, state, dtype)
    else:
        arrays = {}
        for i, act in enumerate(activations):
            check(state)
            arrays[str(i)] = layers.apply(act).astype(dtype, copy=False)
            report(state, i + 1, len(activations), "writing vectors")
        arrays["sentence_to_index"] = np.array(_sentence_index(tokens))
    arrays["layers"] = np.array(layers.label())
    with open(tmp, "wb") as fh:
        np.savez(fh, **arrays)


def _write_hdf5(fh, tokens, activations, layers, refs, state, dtype: str) -> None:
    """Fill an open ``h5py.File`` (from :func:`elmo_engine.atomic.atomic_hdf5`)."""
    import h5py

    fh.attrs["layers"] = layers.label()
    if refs is not None:
        arrays = _selection_arrays(tokens, activations, layers, refs, state, dtype)
        for key in ("vectors", "sentence", "token"):
            fh.create_dataset(key, data=arrays[key])
        fh.create_dataset("word", data=[w.encode("utf-8") for w in arrays["word"]],
                          dtype=h5py.string_dtype("utf-8"))
        return
    for i, act in enumerate(activations):
        check(state)
        fh.create_dataset(str(i), data=layers.apply(act).astype(dtype, copy=False))
        report(state, i + 1, len(activations), "writing vectors")
    ds = fh.create_dataset("sentence_to_index", (1,), dtype=h5py.string_dtype("utf-8"))
    ds[0] = _sentence_index(tokens)


def _row_format(dim: int, sep: str) -> str:
    return sep.join(["%.7g"] * dim)


def _csv_field(text) -> str:
    text = str(text)
    if any(c in text for c in ',"\r\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


def _write_csv(tmp: Path, tokens, activations, layers, refs, state) -> None:
    dim = activations[0].shape[2]
    row = _row_format(dim, ",")
    with open(tmp, "w", encoding="utf-8", newline="") as fh:
        fh.write(",".join(["sentence", "token", "word", "layer", *[f"d{k}" for k in range(dim)]]))
        fh.write("\n")
        for s, t, word, vec in _rows(tokens, activations, layers, refs, state):
            head = f"{s},{t},{_csv_field(word)},"
            if layers.mode == "each":
                for k, v in enumerate(vec.tolist()):
                    fh.write(f"{head}{k},{row % tuple(v)}\n")
            else:
                fh.write(f"{head}{_csv_field(layers.label())},{row % tuple(vec.tolist())}\n")


__all__ = ["DTYPES", "ExportError", "ExportSummary", "FORMATS", "LAYER_MODES", "LayerChoice",
           "TargetExistsError", "describe_os_error", "export_vectors", "format_for",
           "output_files", "refuse_existing", "writing"]
