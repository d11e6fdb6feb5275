"""Load and save biLM checkpoints.

Two formats, one tensor layout (``docs/checkpoint-format.md`` §3; :mod:`.layout`):

* **published**: ``options.json`` + weights HDF5, exactly as AllenNLP / bilm-tf distribute them;
* **native**: ``bilm.json`` (``{"format": "elmo-explorer-bilm", "version": 1, "options": …}``) +
  ``bilm.safetensors`` whose tensor names are the HDF5 dataset paths.

Nothing here unpickles or executes anything from a file. Every problem is a
:class:`~elmo_engine.errors.CheckpointError` naming the file, the dataset, expected and found.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Optional, Tuple

import numpy as np

from elmo_engine.atomic import atomic_hdf5, atomic_path, atomic_write_text
from elmo_engine.errors import CheckpointError
from elmo_engine.model.bilm import BiLM
from elmo_engine.model.hdf5_checks import check_no_extra, check_storage, lookup
from elmo_engine.model.layout import _short, expected_layout, fill_model, model_tensors
# where a checkpoint's files are: a module of its own, read without torch (the command line's
# output checks); its names stay importable from here
from elmo_engine.model.locate import NATIVE_CONFIG, NATIVE_WEIGHTS, resolve_checkpoint
from elmo_engine.model.options import BiLMOptions, _show

NATIVE_FORMAT = "elmo-explorer-bilm"
HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
MAX_PARAMETERS = 1 << 31          # 8 GiB of float32; the largest published ELMo has 93.6M


@dataclass
class CheckpointInfo:
    """Where a model came from and what it is."""

    name: str
    format: str                     # "published" or "native"
    options_path: str
    weights_path: str
    checksum: str                   # sha256 of the options and weights files
    options: BiLMOptions
    parameter_counts: Dict[str, int] = field(default_factory=dict)
    weights_bytes: int = 0

    def describe(self) -> dict:
        return {
            "name": self.name,
            "format": self.format,
            "options_path": self.options_path,
            "weights_path": self.weights_path,
            "checksum": self.checksum,
            "weights_bytes": self.weights_bytes,
            "options": self.options.describe(),
            "parameter_counts": dict(self.parameter_counts),
        }


# ---- checksums -------------------------------------------------------------------------------
def file_checksum(*paths) -> str:
    """SHA-256 of the files in turn; each is checked to be a regular file first (a FIFO or
    ``/dev/zero`` would block or never end)."""
    h = hashlib.sha256()
    for p in paths:
        _check_regular(Path(p))
        with open(p, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 22), b""):
                h.update(chunk)
    return h.hexdigest()


# ---- loading --------------------------------------------------------------------------------
def load_checkpoint(path, device="cpu", progress=None) -> BiLM:
    """Load a checkpoint (directory, options/weights file, or native files) into a :class:`BiLM`.

    The returned model is in eval mode, float32, on ``device``, with ``model.info`` set to a
    :class:`CheckpointInfo`. Raises :class:`CheckpointError` for anything wrong with the files.
    """
    fmt, opts_path, weights_path = resolve_checkpoint(path)
    for f in (opts_path, weights_path):             # a FIFO or a device would block or never end
        _check_regular(f)
    if fmt == "native":
        opts = _read_native_config(opts_path)
    else:
        opts = BiLMOptions.from_file(opts_path)
    n_params = sum(math.prod(shape) for shape in expected_layout(opts).values())
    if n_params > MAX_PARAMETERS:
        raise CheckpointError(opts_path, "the options describe a model larger than this tool "
                              "loads", expected=f"<= {MAX_PARAMETERS} parameters",
                              found=n_params)
    # the weights' shapes are checked against the options before the model is allocated
    if fmt == "native":
        model = _load_safetensors(opts, weights_path)
    else:
        model = _load_hdf5(opts, weights_path, progress)
    model.eval()
    model.requires_grad_(False)
    check_finite_output(model, weights_path)
    name = Path(path).name if Path(path).is_dir() else Path(path).parent.name
    model.info = CheckpointInfo(
        name=name or str(path), format=fmt, options_path=str(opts_path),
        weights_path=str(weights_path), checksum=file_checksum(opts_path, weights_path),
        options=opts, parameter_counts=model.parameter_counts(),
        weights_bytes=Path(weights_path).stat().st_size)
    return model.to(device)


#: the sentence every model must turn into finite vectors at load
PROBE_SENTENCE = ("The", "bank", "of", "the", "river", ".")


def check_finite_output(model: BiLM, weights_path) -> None:
    """Embed one short sentence and refuse the model when a layer's output is not finite,
    naming the first such layer: weights of ±3e38 are finite but overflow float32, and
    every vector would be NaN (``embed`` wrote them, ``contexts`` reported p 0.000)."""
    import torch

    from elmo_engine.model.chars import batch_to_ids

    ids = torch.from_numpy(batch_to_ids([list(PROBE_SENTENCE)],
                                        model.opts.max_characters_per_token))
    with torch.no_grad():
        tok = model.token_vectors(ids[0])                              # (T, P)
        if not bool(torch.isfinite(tok).all()):
            raise CheckpointError(weights_path, "the model's output is not finite (NaN or "
                                  "infinite) from layer 0, the token layer (char CNN, highway, "
                                  "projection), on a test sentence: the weights overflow")
        layers, _mask, _state = model(ids)                             # (L+1, 1, T, 2·out)
    for k in range(1, layers.shape[0]):
        if not bool(torch.isfinite(layers[k]).all()):
            raise CheckpointError(weights_path, f"the model's output is not finite (NaN or "
                                  f"infinite) from layer {k}, biLSTM layer {k}, on a test "
                                  "sentence: the weights overflow")


def _check_regular(path: Path) -> None:
    from elmo_engine.files import regular_file_problem

    problem = regular_file_problem(path)
    if problem:
        raise CheckpointError(path, f"{problem} (a checkpoint is made of regular files)")


def _load_hdf5(opts: BiLMOptions, weights_path: Path, progress=None) -> BiLM:
    """Check every dataset's shape and type, then build the model and read the weights.

    Any failure inside h5py (a corrupt index, a truncated file) becomes a CheckpointError.
    """
    import h5py

    try:
        with open(weights_path, "rb") as fh:
            magic = fh.read(8)
    except OSError as e:
        raise CheckpointError(weights_path, f"cannot read weights file ({e.strerror or e})") from None
    if magic != HDF5_MAGIC:
        raise CheckpointError(weights_path, "not an HDF5 file", expected="HDF5 signature",
                              found=repr(magic[:8]))
    try:
        fh = h5py.File(weights_path, "r")
    except Exception as e:  # h5py raises OSError with library text for truncated files
        raise CheckpointError(weights_path, f"cannot open HDF5 file (truncated or corrupt: "
                              f"{_short(e)})") from None
    layout = expected_layout(opts)
    total = len(layout)
    done = [0]

    def check(name, shape):
        obj = lookup(fh, name, weights_path)       # soft and external links refused unfollowed
        if obj is None:
            hint = ""
            if "embedding" in fh and "char_embed" not in fh:
                hint = " (this is a word-input biLM; only character-input models are supported)"
            raise CheckpointError(weights_path, "missing dataset" + hint + _mismatch_hint(fh, opts),
                                  dataset=name, expected=f"shape {shape}", found="nothing")
        if not isinstance(obj, h5py.Dataset):
            raise CheckpointError(weights_path, "expected a dataset, found a group", dataset=name)
        if obj.external or obj.is_virtual or obj.file.filename != fh.filename:
            raise CheckpointError(weights_path, "dataset is stored outside this file (an external "
                                  "link, external storage or a virtual dataset); only "
                                  "self-contained weights files are loaded", dataset=name)
        if tuple(obj.shape) != tuple(shape):
            raise CheckpointError(weights_path, "dataset has the wrong shape; the options file does "
                                  "not match these weights", dataset=name,
                                  expected=tuple(shape), found=tuple(obj.shape))
        if obj.dtype.kind != "f":
            raise CheckpointError(weights_path, "dataset is not floating point", dataset=name,
                                  expected="float32", found=str(obj.dtype))
        if obj.size and obj.id.get_storage_size() == 0:
            raise CheckpointError(weights_path, "dataset declares a shape but holds no data "
                                  "(an incomplete file)", dataset=name)
        return obj

    def check_all(name, shape):
        check_storage(check(name, shape), name, weights_path)   # chunks fit the shape

    def read(name, shape):
        obj = check(name, shape)
        done[0] += 1
        if progress is not None:
            progress(done[0], total, f"loading {name}")
        return obj                                   # read straight into the parameters

    try:
        for name, shape in layout.items():          # metadata only: nothing is allocated yet
            check_all(name, shape)
        check_no_extra(fh, layout, weights_path)
        model = BiLM(opts)
        fill_model(model, read, weights_path)
    except CheckpointError:
        raise
    except Exception as e:                          # h5py raises many types for corrupt files
        raise CheckpointError(weights_path, f"corrupt HDF5 file ({_short(e)})") from None
    finally:
        fh.close()
    return model


def _mismatch_hint(fh, opts: BiLMOptions) -> str:
    """Say which options disagree with the file, when that can be seen."""
    try:
        n_cnn = sum(1 for k in fh["CNN"].keys() if k.startswith("W_cnn_")) if "CNN" in fh else None
        n_high = sum(1 for k in fh.keys() if k.startswith("CNN_high_"))
        cells = fh.get("RNN_0/RNN/MultiRNNCell")
        n_layers = len(cells.keys()) if cells is not None else None
    except Exception:
        return ""
    notes = []
    if n_cnn is not None and n_cnn != len(opts.filters):
        notes.append(f"options list {len(opts.filters)} filters, the file has {n_cnn}")
    if n_high != opts.n_highway:
        notes.append(f"options say n_highway={opts.n_highway}, the file has {n_high}")
    if n_layers is not None and n_layers != opts.n_layers:
        notes.append(f"options say n_layers={opts.n_layers}, the file has {n_layers}")
    return (" — " + "; ".join(notes)) if notes else ""


def _read_native_config(cfg_path: Path) -> BiLMOptions:
    from elmo_engine.files import read_bounded
    from elmo_engine.model.options import MAX_OPTIONS_BYTES

    try:                     # bounded: a 2 GiB sparse bilm.json is refused, not read whole
        d = json.loads(read_bounded(cfg_path, MAX_OPTIONS_BYTES).decode("utf-8"))
    except (OSError, ValueError, RecursionError) as e:   # ValueError: bad UTF-8/JSON, huge ints
        raise CheckpointError(cfg_path, f"cannot read model config ({_short(e)})") from None
    if not isinstance(d, dict) or d.get("format") != NATIVE_FORMAT:
        raise CheckpointError(cfg_path, "not an ELMo Explorer model config", dataset="format",
                              expected=NATIVE_FORMAT,
                              found=(_show(d.get("format")) if isinstance(d, dict)
                                     else type(d).__name__))
    if d.get("version") != 1:
        raise CheckpointError(cfg_path, "unsupported model config version", dataset="version",
                              expected=1, found=_show(d.get("version")))
    return BiLMOptions.from_json_dict(d.get("options"), cfg_path)


def _load_safetensors(opts: BiLMOptions, weights_path: Path) -> BiLM:
    from safetensors import safe_open

    try:
        fh = safe_open(str(weights_path), framework="np")
        keys = set(fh.keys())
    except Exception as e:
        raise CheckpointError(weights_path, f"not a valid safetensors file ({_short(e)})") from None
    layout = expected_layout(opts)

    def check(name, shape):
        if name not in keys:
            raise CheckpointError(weights_path, "missing tensor", dataset=name,
                                  expected=f"shape {shape}", found="nothing")
        try:
            sl = fh.get_slice(name)
            found, dtype = tuple(sl.get_shape()), str(sl.get_dtype())
        except Exception as e:
            raise CheckpointError(weights_path, f"cannot read tensor header ({_short(e)})",
                                  dataset=name) from None
        if found != tuple(shape):
            raise CheckpointError(weights_path, "tensor has the wrong shape; the config does not "
                                  "match these weights", dataset=name, expected=tuple(shape),
                                  found=found)
        if dtype not in ("F16", "F32", "F64"):
            raise CheckpointError(weights_path, "tensor is not float16/32/64", dataset=name,
                                  expected="F32", found=dtype)

    def read(name, shape):
        try:
            arr = fh.get_tensor(name)
        except Exception as e:
            raise CheckpointError(weights_path, f"cannot read tensor ({_short(e)})",
                                  dataset=name) from None
        if tuple(arr.shape) != tuple(shape):
            raise CheckpointError(weights_path, "tensor has the wrong shape; the config does not "
                                  "match these weights", dataset=name, expected=tuple(shape),
                                  found=tuple(arr.shape))
        if arr.dtype.kind != "f":
            raise CheckpointError(weights_path, "tensor is not floating point", dataset=name,
                                  expected="float32", found=str(arr.dtype))
        return arr.astype(np.float32, copy=False)

    for name, shape in layout.items():              # header only: nothing is allocated yet
        check(name, shape)
    extra = sorted(keys - set(layout))
    if extra:
        raise CheckpointError(weights_path, "the weights have tensors the config does not describe",
                              dataset=extra[0], expected="no such tensor",
                              found=f"{len(extra)} unexpected tensor(s)")
    model = BiLM(opts)
    fill_model(model, read, weights_path)
    return model


# ---- saving ---------------------------------------------------------------------------------
def save_published(model: BiLM, folder, options_name="options.json",
                   weights_name="lm_weights.hdf5", extra_options: Optional[dict] = None) -> Tuple[Path, Path]:
    """Write ``options.json`` + weights HDF5 in the published layout (atomically, each file)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tensors = model_tensors(model)
    weights = folder / weights_name
    with atomic_hdf5(weights) as fh:            # a full disk is a WriteError, not a crash
        for name, arr in tensors.items():
            fh.create_dataset(name, data=arr.astype(np.float32))
    opts_dict = model.opts.to_json_dict()
    opts_dict.update(extra_options or {})
    options = folder / options_name
    atomic_write_text(options, json.dumps(opts_dict, indent=2) + "\n")
    return options, weights


def save_native(model: BiLM, folder, metadata: Optional[dict] = None) -> Tuple[Path, Path]:
    """Write ``bilm.json`` + ``bilm.safetensors`` (atomically, each file)."""
    from safetensors.numpy import save as serialize

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {k: np.ascontiguousarray(v) for k, v in model_tensors(model).items()}
    weights = folder / NATIVE_WEIGHTS
    with atomic_path(weights) as tmp:
        # serialised in memory: save_file writes through its own hidden ".tmpXXXXXX" file
        # beside the target, which a process killed mid-save would leave behind
        tmp.write_bytes(serialize(tensors))
    cfg = {"format": NATIVE_FORMAT, "version": 1, "options": model.opts.to_json_dict()}
    if metadata:
        cfg["metadata"] = metadata
    config = folder / NATIVE_CONFIG
    atomic_write_text(config, json.dumps(cfg, indent=2) + "\n")
    return config, weights
