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
write (disk full, no permission) raises :class:`~elmo_engine.io.writing.ExportError` naming the
path and leaves nothing behind (:mod:`elmo_engine.io.writing`, the rules every exporter shares).
"""
from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from elmo_engine.atomic import atomic_hdf5, atomic_path
from elmo_engine.errors import InputError
from elmo_engine.io.embeddings_file import EmbeddingsWriter
from elmo_engine.io.vector_formats import DTYPES, FORMATS, LAYER_MODES, format_for
from elmo_engine.io.writing import refuse_existing, writing
from elmo_engine.progress import TaskState, check, report

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
        from elmo_engine.model.mix import MAX_GAMMA, plain_weights

        w = np.asarray(self.weights, dtype=np.float64)
        if not np.all(np.isfinite(w)) or not np.isfinite(self.gamma):
            raise InputError("mix weights and gamma must be finite numbers")
        if abs(self.gamma) > MAX_GAMMA:
            raise InputError(f"the mix's gamma must be within ±{MAX_GAMMA:g}, got {self.gamma:g}")
        if not self.pre_softmax:
            try:
                plain_weights(w)
            except ValueError as e:
                raise InputError(str(e)) from None

    def label(self) -> str:
        if self.mode != "mix":
            return self.mode
        return "mix(" + ",".join(f"{w:g}" for w in self.normalised()) + f";gamma={self.gamma:g})"

    def normalised(self) -> np.ndarray:
        """The mix weights as they are applied (sum 1), float64."""
        from elmo_engine.model.mix import plain_weights, softmax_weights

        w = np.asarray(self.weights, dtype=np.float64)
        return softmax_weights(w) if self.pre_softmax else plain_weights(w)

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


# ---- the export ----------------------------------------------------------------------------
@dataclass(frozen=True)
class SentenceVectors:
    """One sentence's activations on their way into an export (:func:`export_stream`).

    ``index``: the sentence's number in the input (0-based; the key of its dataset, the
    ``sentence`` column); ``activations`` ``(L+1, n, D)`` for its ``n`` tokens; ``positions``:
    the tokens to write, in this order (None: every token, the whole sentence).
    """

    index: int
    tokens: Sequence[str]
    activations: np.ndarray
    positions: Optional[Sequence[int]] = None


def export_vectors(path, tokens: Sequence[Sequence[str]], activations: Sequence[np.ndarray],
                   fmt: Optional[str] = None, layers: LayerChoice = LayerChoice(),
                   refs: Optional[Sequence[Tuple[int, int]]] = None, overwrite: bool = False,
                   state: Optional[TaskState] = None, dtype: str = "float32") -> ExportSummary:
    """Write vectors of every sentence, or of the tokens ``refs`` = [(sentence, token), …]
    (what the app holds in memory; :func:`export_stream` writes a stream of sentences).

    Parameters
    ----------
    path : target file (npz, hdf5, csv) or folder (tsv)
    tokens : tokens per sentence
    activations : per sentence ``(L+1, n, 2P)`` float32 (as the embedder returns them)
    fmt : "npz", "hdf5", "tsv" or "csv" (default: from the extension)
    layers : the layer choice
    refs : only these tokens (a selection), written in this order; None for every sentence
    overwrite : replace an existing target
    state : progress and cancel
    dtype : the vectors' type in npz and hdf5: "float32" (default) or "float16" (rounded when
        written; TSV and CSV are text and take float32 only)

    Raises
    ------
    InputError : inconsistent input or bad choices; TargetExistsError; ExportError on write failure
    """
    if len(tokens) != len(activations):
        raise InputError(f"{len(tokens)} token lists for {len(activations)} activations")
    if not tokens:
        raise InputError("there are no sentences to export")
    if refs is None:
        items: List[SentenceVectors] = [SentenceVectors(i, t, a)
                                        for i, (t, a) in enumerate(zip(tokens, activations))]
        return export_stream(path, items, fmt, layers, overwrite=overwrite, state=state,
                             dtype=dtype, total=len(items))
    refs = [_check_ref(r, tokens) for r in refs]
    if not refs:
        raise InputError("the selection is empty: no tokens to export")
    runs: List[Tuple[int, List[int]]] = []      # runs of one sentence's tokens, in order
    for s, t in refs:
        if runs and runs[-1][0] == s:
            runs[-1][1].append(t)
        else:
            runs.append((s, [t]))
    items = [SentenceVectors(s, tokens[s], activations[s], ts) for s, ts in runs]
    return export_stream(path, items, fmt, layers, n_selected=len(refs), overwrite=overwrite,
                         state=state, dtype=dtype, total=len(items))


def export_stream(path, sentences: Iterable[SentenceVectors], fmt: Optional[str] = None,
                  layers: LayerChoice = LayerChoice(), n_selected: Optional[int] = None,
                  overwrite: bool = False, state: Optional[TaskState] = None,
                  dtype: str = "float32", total: Optional[int] = None) -> ExportSummary:
    """Write ``sentences`` (any iterable, taken one at a time: a caller that embeds them lazily,
    as ``export vectors`` does, holds one chunk whatever the input's length) in the layouts of
    the module docstring.

    ``n_selected``: the number of tokens the items' ``positions`` select, for the chosen-tokens
    layout (npz and HDF5 write its ``vectors`` array as it comes, so its length is needed
    first); None for whole sentences. ``total``: the number of items, for progress (``state``).

    Raises
    ------
    InputError : inconsistent input or bad choices; TargetExistsError; ExportError on write failure
    """
    path = Path(path)
    fmt = format_for(path, fmt)
    if dtype not in DTYPES:
        raise InputError(f"unknown vector dtype '{dtype}' (use {', '.join(DTYPES)})")
    if dtype != "float32" and fmt not in ("npz", "hdf5"):
        raise InputError(f"--dtype {dtype} applies to npz and hdf5 outputs; {fmt} is text")
    it = iter(sentences)
    first = next(it, None)
    if first is None:
        raise InputError("there are no sentences to export" if n_selected is None
                         else "the selection is empty: no tokens to export")
    shape = np.shape(first.activations)
    if len(shape) != 3:
        raise InputError(f"sentence {first.index}: activations {shape} are not (layers, tokens, "
                         "width)")
    layers.validate(shape[0])
    refuse_existing(path, overwrite)
    if fmt == "tsv":
        from elmo_engine.io.vectors_tsv import check_tsv_target

        check_tsv_target(path, overwrite)          # a folder: never one the user filled
    stream = _Checked(_put_back(first, it), shape[0], shape[2], state, total, n_selected)
    del first                                  # held by the stream only: written, then dropped
    selection = n_selected is not None
    with writing(path):
        if fmt == "tsv":
            from elmo_engine.io.vectors_tsv import write_tsv

            files = write_tsv(path, stream, layers, overwrite)
        else:
            if fmt == "hdf5":                    # HDF5 through the crash-safe writer
                with atomic_hdf5(path) as fh:
                    if selection:
                        _write_hdf5_selection(fh, stream, layers, int(n_selected or 0), dtype)
                    else:
                        _write_whole(EmbeddingsWriter(fh, "hdf5"), stream, layers, dtype)
            elif fmt == "npz":
                with atomic_path(path) as tmp:
                    if selection:
                        _write_npz_selection(tmp, stream, layers, int(n_selected or 0), dtype)
                    else:
                        _write_whole(EmbeddingsWriter(tmp, "npz"), stream, layers, dtype)
            else:
                with atomic_path(path) as tmp:
                    _write_csv(tmp, stream, layers)
            files = [path]
    return ExportSummary(path, fmt, stream.whole + len(stream.sentences), stream.vectors,
                         tuple(files))


def _put_back(first: SentenceVectors, rest: Iterator[SentenceVectors]
              ) -> Iterator[SentenceVectors]:
    """``first`` then ``rest``, keeping no reference to ``first`` once it is taken (unlike
    ``itertools.chain``, whose arguments live as long as it does)."""
    box = [first]
    del first
    yield box.pop()
    yield from rest


def _check_ref(ref, tokens) -> Tuple[int, int]:
    s, t = int(ref[0]), int(ref[1])
    if not (0 <= s < len(tokens) and 0 <= t < len(tokens[s])):
        raise InputError(f"the selection names token {t} of sentence {s}, which does not exist")
    return s, t


class _Checked:
    """The items of an export, checked one by one as they are taken (shapes, cancel), with
    progress and what was written: the sentences that gave rows and the vectors."""

    def __init__(self, items: Iterator[SentenceVectors], n_layers: int, dim: int,
                 state: Optional[TaskState], total: Optional[int], n_selected: Optional[int]):
        self.items, self.n_layers, self.dim = items, n_layers, dim
        self.state, self.total, self.n_selected = state, total, n_selected
        self.sentences: set = set()
        self.whole = 0
        self.vectors = 0

    def __iter__(self) -> Iterator[SentenceVectors]:
        for k, item in enumerate(self.items):
            check(self.state)
            a = item.activations
            if a is None or a.ndim != 3 or a.shape[1] != len(item.tokens) \
                    or a.shape[0] != self.n_layers or a.shape[2] != self.dim:
                shape = None if a is None else a.shape
                raise InputError(f"sentence {item.index}: activations {shape} do not match its "
                                 f"{len(item.tokens)} tokens ({self.n_layers} layers of "
                                 f"{self.dim} expected)")
            n = len(item.tokens) if item.positions is None else len(item.positions)
            if item.positions is not None:
                for t in item.positions:
                    if not 0 <= t < len(item.tokens):
                        raise InputError(f"the selection names token {t} of sentence "
                                         f"{item.index}, which does not exist")
            if item.positions is None:
                self.whole += 1                     # each whole sentence comes once
            elif n:
                self.sentences.add(item.index)      # a selection may come back to one
            self.vectors += n
            if self.n_selected is not None:
                _check_count(self.n_selected, self.vectors, final=False)
            yield item
            if self.total:
                report(self.state, k + 1, self.total, "writing vectors")
        if self.n_selected is not None:           # inside the writer's block: nothing is kept
            _check_count(self.n_selected, self.vectors)


def _rows(items: Iterable[SentenceVectors], layers: LayerChoice):
    """Yield ``(sentence, token, the sentence's tokens, vectors)`` per token written, vectors
    ``(K, D)`` (``each``) or ``(D,)``."""
    for item in items:
        positions: Sequence[int]
        if item.positions is None:
            arr, positions = layers.apply(item.activations), range(len(item.tokens))
        else:
            positions = list(item.positions)
            arr = layers.apply(item.activations[:, positions])
        for j, t in enumerate(positions):
            yield item.index, t, item.tokens, (arr[:, j] if layers.mode == "each" else arr[j])


def _write_whole(writer: EmbeddingsWriter, items, layers: LayerChoice, dtype: str) -> None:
    """One dataset per sentence and ``sentence_to_index`` (the AllenNLP layout), streamed."""
    try:
        writer.add_attribute("layers", layers.label())
        for item in items:
            key = str(item.index)
            writer.add(key, layers.apply(item.activations).astype(dtype, copy=False))
            writer.index.add(" ".join(item.tokens), key)
        writer.finish()
    finally:
        writer.close()


#: selected vectors gathered before each write to the chosen-tokens ``vectors`` array
_ROW_BLOCK = 1024


def _selection_blocks(items, layers: LayerChoice, dtype: str, meta: Dict[str, list]):
    """Blocks of selected vectors ``(b, [K,] D)`` in ``dtype``; the rows' sentence, token and
    word go to ``meta`` (a few bytes a row, kept to the end)."""
    block: List[np.ndarray] = []
    for s, t, toks, vec in _rows(items, layers):
        meta["sentence"].append(s)
        meta["token"].append(t)
        meta["word"].append(toks[t])
        block.append(vec)
        if len(block) >= _ROW_BLOCK:
            yield np.stack(block).astype(dtype)
            block = []
    if block:
        yield np.stack(block).astype(dtype)


def _check_count(expected: int, got: int, final: bool = True) -> None:
    """Refuse a selection that holds more (or, at the end, fewer) tokens than announced: the
    array's length is written first (nothing is kept: the partial file is removed)."""
    if got > expected or (final and got != expected):
        raise InputError(f"{expected} tokens were to be written, {'more than ' if not final else ''}"
                         f"{got} were given (did the input change while it was read?)")


def _selection_shape(n: int, n_layers: int, dim: int, layers: LayerChoice) -> Tuple[int, ...]:
    return (n, n_layers, dim) if layers.mode == "each" else (n, dim)


def _write_npz_selection(tmp: Path, items: "_Checked", layers: LayerChoice, n: int,
                         dtype: str) -> None:
    meta: Dict[str, list] = {"sentence": [], "token": [], "word": []}
    shape = _selection_shape(n, items.n_layers, items.dim, layers)
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        with zf.open("vectors.npy", "w", force_zip64=True) as member:
            np.lib.format.write_array_header_1_0(member, {
                "descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
                "fortran_order": False, "shape": shape})
            for block in _selection_blocks(items, layers, dtype, meta):
                member.write(np.ascontiguousarray(block).tobytes())
        arrays = {"sentence": np.array(meta["sentence"], np.int64),
                  "token": np.array(meta["token"], np.int64),
                  "word": np.array(meta["word"], dtype=str), "layers": np.array(layers.label())}
        for key, arr in arrays.items():
            with zf.open(key + ".npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, arr, allow_pickle=False)


def _write_hdf5_selection(fh, items: "_Checked", layers: LayerChoice, n: int,
                          dtype: str) -> None:
    """Fill an open ``h5py.File`` (from :func:`elmo_engine.atomic.atomic_hdf5`)."""
    import h5py

    fh.attrs["layers"] = layers.label()
    meta: Dict[str, list] = {"sentence": [], "token": [], "word": []}
    vectors = fh.create_dataset("vectors", _selection_shape(n, items.n_layers, items.dim, layers),
                                dtype=dtype)
    row = 0
    for block in _selection_blocks(items, layers, dtype, meta):
        vectors[row:row + len(block)] = block
        row += len(block)
    for key in ("sentence", "token"):
        fh.create_dataset(key, data=np.array(meta[key], np.int64))
    fh.create_dataset("word", data=[w.encode("utf-8") for w in meta["word"]],
                      dtype=h5py.string_dtype("utf-8"))


def _row_format(dim: int, sep: str) -> str:
    return sep.join(["%.7g"] * dim)


def _csv_field(text) -> str:
    text = str(text)
    if any(c in text for c in ',"\r\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


def _write_csv(tmp: Path, items: "_Checked", layers: LayerChoice) -> None:
    row = _row_format(items.dim, ",")
    with open(tmp, "w", encoding="utf-8", newline="") as fh:
        fh.write(",".join(["sentence", "token", "word", "layer",
                           *[f"d{k}" for k in range(items.dim)]]))
        fh.write("\n")
        for s, t, toks, vec in _rows(items, layers):
            head = f"{s},{t},{_csv_field(toks[t])},"
            if layers.mode == "each":
                for k, v in enumerate(vec.tolist()):
                    fh.write(f"{head}{k},{row % tuple(v)}\n")
            else:
                fh.write(f"{head}{_csv_field(layers.label())},{row % tuple(vec.tolist())}\n")


__all__ = ["DTYPES", "ExportSummary", "FORMATS", "LAYER_MODES", "LayerChoice", "SentenceVectors",
           "export_stream", "export_vectors", "format_for", "output_files"]
