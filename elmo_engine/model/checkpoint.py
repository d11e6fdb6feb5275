"""Load and save biLM checkpoints.

Two formats, one tensor layout (``docs/checkpoint-format.md`` §3; :mod:`.layout`):

* **published**: ``options.json`` + weights HDF5, exactly as AllenNLP / bilm-tf distribute them;
* **native**: ``bilm.json`` (``{"format": "elmo-explorer-bilm", "version": 1, "options": …}``) +
  ``bilm.safetensors`` whose tensor names are the HDF5 dataset paths.

Nothing here unpickles or executes anything from a file. Every problem is a
:class:`~elmo_engine.errors.CheckpointError` naming the file, the dataset, expected and found.
"""
from __future__ import annotations

import dataclasses
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Optional, Tuple

import numpy as np

from elmo_engine.atomic import atomic_hdf5, atomic_path, atomic_write_text
from elmo_engine.errors import CheckpointError
from elmo_engine.model.bilm import BiLM
# the torch-free half (layout, header checks, info) lives in .header; its names stay importable
# from here
from elmo_engine.model.header import (HDF5_MAGIC, MAX_PARAMETERS, NATIVE_FORMAT,  # noqa: F401
                                      CheckpointInfo, check_hdf5_dataset, check_hdf5_layout,
                                      check_regular, check_safetensors_layout, checkpoint_info,
                                      expected_layout, file_checksum, open_hdf5,
                                      open_safetensors, read_checkpoint_info,
                                      resolve_and_read_options)
from elmo_engine.model.header import short_error as _short
from elmo_engine.model.layout import fill_model, model_tensors
from elmo_engine.model.locate import NATIVE_CONFIG, NATIVE_WEIGHTS, resolve_checkpoint  # noqa: F401
from elmo_engine.model.options import BiLMOptions


# ---- loading --------------------------------------------------------------------------------
def load_checkpoint(path, device="cpu", progress=None) -> BiLM:
    """Load a checkpoint (directory, options/weights file, or native files) into a :class:`BiLM`.

    The returned model is in eval mode, float32, on ``device``, with ``model.info`` set to a
    :class:`CheckpointInfo`. Raises :class:`CheckpointError` for anything wrong with the files.
    """
    fmt, opts_path, weights_path, opts = resolve_and_read_options(path)
    # the checksum (SHA-256 of both files: 0.23 s of the full size's 0.6 s load) is computed in
    # a second thread while the weights are read and checked (hashlib lets go of the GIL); on
    # an error it stops at its next block
    failed = threading.Event()
    with ThreadPoolExecutor(1, thread_name_prefix="checkpoint-checksum") as pool:
        checksum = pool.submit(file_checksum, opts_path, weights_path, stop=failed.is_set)
        try:
            # the weights' shapes are checked against the options before the model is allocated
            if fmt == "native":
                model = _load_safetensors(opts, weights_path)
            else:
                model = _load_hdf5(opts, weights_path, progress)
            model.eval()
            model.requires_grad_(False)
            check_finite_output(model, weights_path)
            model.info = checkpoint_info(path, fmt, opts_path, weights_path, opts,
                                         model.parameter_counts(), checksum=checksum.result())
        except BaseException:
            failed.set()
            raise
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
    # plain GEMMs for these few rows: packed copies of the weights made here would be
    # thrown away by a change of precision (bf16) and are not used by large batches in
    # float32 (packing every input weight took 0.2 s of a full-size model's load)
    config = model.fast_path
    model.fast_path = dataclasses.replace(config, packed_weights=False)
    try:
        _check_finite_layers(model, ids, weights_path)
    finally:
        model.fast_path = config


def _check_finite_layers(model: BiLM, ids, weights_path) -> None:
    import torch

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


def _load_hdf5(opts: BiLMOptions, weights_path: Path, progress=None) -> BiLM:
    """Check every dataset's shape and type, then build the model and read the weights.

    Any failure inside h5py (a corrupt index, a truncated file) becomes a CheckpointError.
    """
    fh = open_hdf5(weights_path)
    layout = expected_layout(opts)
    total = len(layout)
    done = [0]

    def read(name, shape):
        obj = check_hdf5_dataset(fh, name, shape, weights_path, opts)
        done[0] += 1
        if progress is not None:
            progress(done[0], total, f"loading {name}")
        return obj                                   # read straight into the parameters

    try:
        check_hdf5_layout(fh, opts, weights_path)    # metadata only: nothing is allocated yet
        model = BiLM(opts)
        fill_model(model, read, weights_path)
    except CheckpointError:
        raise
    except Exception as e:                          # h5py raises many types for corrupt files
        raise CheckpointError(weights_path, f"corrupt HDF5 file ({_short(e)})") from None
    finally:
        fh.close()
    return model


def _load_safetensors(opts: BiLMOptions, weights_path: Path) -> BiLM:
    fh, keys = open_safetensors(weights_path)
    check_safetensors_layout(fh, keys, opts, weights_path)   # headers only: nothing allocated

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

    model = BiLM(opts)
    fill_model(model, read, weights_path)
    return model


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
