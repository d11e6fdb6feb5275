"""What a checkpoint is, read from its files' headers without building the model (no torch).

The published tensor layout (``docs/checkpoint-format.md`` §3; Peters et al. 2018's bilm-tf
names) as names and shapes for given options, the checks of a weights file's datasets made from
metadata only, and :func:`read_checkpoint_info`: options, parameter counts per part and checksum
of a checkpoint, with every dataset's shape and type checked against the options — what
``elmo-explorer info`` prints in well under a second, where loading the model takes seconds.

The loaders in :mod:`.checkpoint` run the same checks before they allocate anything, then read
the values (and refuse non-finite ones), which this module never does.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Optional, Tuple

from elmo_engine.errors import CheckpointError
from elmo_engine.model.locate import NATIVE_CONFIG, NATIVE_WEIGHTS, resolve_checkpoint  # noqa: F401
from elmo_engine.model.options import BiLMOptions, _show

NATIVE_FORMAT = "elmo-explorer-bilm"
HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
MAX_PARAMETERS = 1 << 31          # 8 GiB of float32; the largest published ELMo has 93.6M
#: the parts of :meth:`CheckpointInfo.parameter_counts`, in order
PARTS = ("char_embedding", "convolutions", "highway", "token_projection", "lstm")


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


# ---- the layout -------------------------------------------------------------------------------
def cell_name(direction: int, layer: int, what: str) -> str:
    return f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell/{what}"


def expected_layout(opts: BiLMOptions) -> Dict[str, Tuple[int, ...]]:
    """Every dataset of the published weights file and its shape."""
    c, n, p, d, out = (opts.char_embed_dim, opts.n_filters, opts.projection_dim, opts.lstm_dim,
                       opts.output_dim)
    lay: Dict[str, Tuple[int, ...]] = {"char_embed": (261, c)}
    for i, (w, k) in enumerate(opts.filters):
        lay[f"CNN/W_cnn_{i}"] = (1, w, c, k)
        lay[f"CNN/b_cnn_{i}"] = (k,)
    for h in range(opts.n_highway):
        lay[f"CNN_high_{h}/W_carry"] = (n, n)
        lay[f"CNN_high_{h}/b_carry"] = (n,)
        lay[f"CNN_high_{h}/W_transform"] = (n, n)
        lay[f"CNN_high_{h}/b_transform"] = (n,)
    if opts.has_token_projection:
        lay["CNN_proj/W_proj"] = (n, p)
        lay["CNN_proj/b_proj"] = (p,)
    for direction in range(2):
        for layer in range(opts.n_layers):
            in_dim = p if layer == 0 else out
            lay[cell_name(direction, layer, "W_0")] = (in_dim + out, 4 * d)
            lay[cell_name(direction, layer, "B")] = (4 * d,)
            if opts.has_lstm_projection:
                lay[cell_name(direction, layer, "W_P_0")] = (d, p)
    return lay


def part_of(name: str) -> str:
    """The part of the model a dataset of :func:`expected_layout` belongs to."""
    if name == "char_embed":
        return "char_embedding"
    if name.startswith("CNN/"):
        return "convolutions"
    if name.startswith("CNN_high_"):
        return "highway"
    if name.startswith("CNN_proj/"):
        return "token_projection"
    return "lstm"


def parameter_counts(opts: BiLMOptions) -> Dict[str, int]:
    """Parameters per part and in total, as :meth:`BiLM.parameter_counts` counts them."""
    counts = dict.fromkeys(PARTS, 0)
    for name, shape in expected_layout(opts).items():
        counts[part_of(name)] += math.prod(shape)
    counts["total"] = sum(counts.values())
    return counts


def check_size(opts: BiLMOptions, opts_path) -> None:
    """Refuse options that describe a model larger than this tool loads."""
    n_params = sum(math.prod(shape) for shape in expected_layout(opts).values())
    if n_params > MAX_PARAMETERS:
        raise CheckpointError(opts_path, "the options describe a model larger than this tool "
                              "loads", expected=f"<= {MAX_PARAMETERS} parameters",
                              found=n_params)


# ---- files ------------------------------------------------------------------------------------
def short_error(e: BaseException) -> str:
    """The first line of an exception's text, at most 200 characters."""
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return text[:200]


def check_regular(path: Path) -> None:
    from elmo_engine.files import regular_file_problem

    problem = regular_file_problem(path)
    if problem:
        raise CheckpointError(path, f"{problem} (a checkpoint is made of regular files)")


def file_checksum(*paths, stop: Optional[Callable[[], bool]] = None) -> str:
    """SHA-256 of the files in turn; each is checked to be a regular file first (a FIFO or
    ``/dev/zero`` would block or never end). ``stop()`` is asked between 4 MB blocks: when it
    answers True the reading ends and "" is returned."""
    h = hashlib.sha256()
    for p in paths:
        check_regular(Path(p))
        with open(p, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 22), b""):
                if stop is not None and stop():
                    return ""
                h.update(chunk)
    return h.hexdigest()


def read_native_config(cfg_path: Path) -> BiLMOptions:
    from elmo_engine.files import read_bounded, utf8_text
    from elmo_engine.model.options import MAX_OPTIONS_BYTES

    try:                     # bounded: a 2 GiB sparse bilm.json is refused, not read whole
        d = json.loads(utf8_text(read_bounded(cfg_path, MAX_OPTIONS_BYTES), bom=True))
    except (OSError, ValueError, RecursionError) as e:   # ValueError: bad UTF-8/JSON, huge ints
        raise CheckpointError(cfg_path, f"cannot read model config ({short_error(e)})") from None
    if not isinstance(d, dict) or d.get("format") != NATIVE_FORMAT:
        raise CheckpointError(cfg_path, "not an ELMo Explorer model config", dataset="format",
                              expected=NATIVE_FORMAT,
                              found=(_show(d.get("format")) if isinstance(d, dict)
                                     else type(d).__name__))
    if d.get("version") != 1:
        raise CheckpointError(cfg_path, "unsupported model config version", dataset="version",
                              expected=1, found=_show(d.get("version")))
    return BiLMOptions.from_json_dict(d.get("options"), cfg_path)


def resolve_and_read_options(path) -> Tuple[str, Path, Path, BiLMOptions]:
    """The format, options file, weights file and options of a checkpoint; both files regular
    and the options within :data:`MAX_PARAMETERS`."""
    fmt, opts_path, weights_path = resolve_checkpoint(path)
    for f in (opts_path, weights_path):             # a FIFO or a device would block or never end
        check_regular(f)
    opts = read_native_config(opts_path) if fmt == "native" else BiLMOptions.from_file(opts_path)
    check_size(opts, opts_path)
    return fmt, Path(opts_path), Path(weights_path), opts


# ---- weights headers --------------------------------------------------------------------------
def open_hdf5(weights_path: Path):
    """An open h5py file after its signature is checked; any failure is a CheckpointError."""
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
        return h5py.File(weights_path, "r")
    except Exception as e:  # h5py raises OSError with library text for truncated files
        raise CheckpointError(weights_path, f"cannot open HDF5 file (truncated or corrupt: "
                              f"{short_error(e)})") from None


def check_hdf5_dataset(fh, name: str, shape: Tuple[int, ...], weights_path, opts: BiLMOptions):
    """The dataset ``name`` of an open weights file, checked from its metadata: present, a
    dataset in this file, of ``shape``, floating point, with storage. Returns the dataset."""
    import h5py

    from elmo_engine.model.hdf5_checks import lookup

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


def check_hdf5_layout(fh, opts: BiLMOptions, weights_path) -> None:
    """Every dataset of the layout checked (storage included) and nothing else in the file;
    metadata only: nothing is allocated."""
    from elmo_engine.model.hdf5_checks import check_no_extra, check_storage

    layout = expected_layout(opts)
    try:
        for name, shape in layout.items():
            check_storage(check_hdf5_dataset(fh, name, shape, weights_path, opts), name,
                          weights_path)            # chunks fit the shape
        check_no_extra(fh, layout, weights_path)
    except CheckpointError:
        raise
    except Exception as e:                          # h5py raises many types for corrupt files
        raise CheckpointError(weights_path, f"corrupt HDF5 file ({short_error(e)})") from None


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


def open_safetensors(weights_path: Path):
    """An open safetensors file (NumPy framework) and its tensor names."""
    from safetensors import safe_open

    try:
        fh = safe_open(str(weights_path), framework="np")
        return fh, set(fh.keys())
    except Exception as e:
        raise CheckpointError(weights_path, f"not a valid safetensors file ({short_error(e)})") from None


def check_safetensors_layout(fh, keys: set, opts: BiLMOptions, weights_path) -> None:
    """Every tensor's header checked against the layout, and no tensor the layout lacks."""
    layout = expected_layout(opts)
    for name, shape in layout.items():
        if name not in keys:
            raise CheckpointError(weights_path, "missing tensor", dataset=name,
                                  expected=f"shape {shape}", found="nothing")
        try:
            sl = fh.get_slice(name)
            found, dtype = tuple(sl.get_shape()), str(sl.get_dtype())
        except Exception as e:
            raise CheckpointError(weights_path, f"cannot read tensor header ({short_error(e)})",
                                  dataset=name) from None
        if found != tuple(shape):
            raise CheckpointError(weights_path, "tensor has the wrong shape; the config does not "
                                  "match these weights", dataset=name, expected=tuple(shape),
                                  found=found)
        if dtype not in ("F16", "F32", "F64"):
            raise CheckpointError(weights_path, "tensor is not float16/32/64", dataset=name,
                                  expected="F32", found=dtype)
    extra = sorted(keys - set(layout))
    if extra:
        raise CheckpointError(weights_path, "the weights have tensors the config does not describe",
                              dataset=extra[0], expected="no such tensor",
                              found=f"{len(extra)} unexpected tensor(s)")


def checkpoint_name(path) -> str:
    p = Path(path)
    name = p.name if p.is_dir() else p.parent.name
    return name or str(path)


def read_checkpoint_info(path) -> CheckpointInfo:
    """A checkpoint's :class:`CheckpointInfo` from its options and its weights' headers: every
    dataset's shape and type checked against the options, nothing allocated, no torch. The values
    are not read (the loaders check they are finite)."""
    fmt, opts_path, weights_path, opts = resolve_and_read_options(path)
    if fmt == "native":
        fh, keys = open_safetensors(weights_path)
        check_safetensors_layout(fh, keys, opts, weights_path)
    else:
        h5 = open_hdf5(weights_path)
        try:
            check_hdf5_layout(h5, opts, weights_path)
        finally:
            h5.close()
    return checkpoint_info(path, fmt, opts_path, weights_path, opts, parameter_counts(opts))


def checkpoint_info(path, fmt: str, opts_path: Path, weights_path: Path, opts: BiLMOptions,
                    counts: Dict[str, int], checksum: Optional[str] = None) -> CheckpointInfo:
    """The :class:`CheckpointInfo` of checked files: their names, checksum (computed here
    unless given: :func:`file_checksum` of the two files) and size."""
    return CheckpointInfo(
        name=checkpoint_name(path), format=fmt, options_path=str(opts_path),
        weights_path=str(weights_path),
        checksum=checksum if checksum is not None else file_checksum(opts_path, weights_path),
        options=opts, parameter_counts=counts, weights_bytes=Path(weights_path).stat().st_size)
