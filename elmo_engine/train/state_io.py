"""Resumable training state and the inference export.

Training state lives in ``OUT/checkpoint/``: ``state.safetensors`` (model weights including the
softmax, optimizer tensors, the LSTM state carried into the next window, generator states) and
``state.json`` (step, position in the data, configuration, optimizer hyperparameters, history,
and the sha256 of the tensors file it belongs to). Both are written atomically, tensors first; the
tensors file also holds the state document in its metadata, so a write killed at any moment
leaves the previous complete checkpoint or the new one. Nothing is pickled.

The inference export is the published layout (``options.json`` + ``lm_weights.hdf5``) written by
:func:`elmo_engine.model.checkpoint.save_published`, plus ``vocab.txt`` and ``training.json``.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Dict, List, Optional, Tuple, Union

import torch
from torch import Tensor

from elmo_engine.atomic import atomic_write_bytes, atomic_write_text
from elmo_engine.model.checkpoint import save_published
from elmo_engine.errors import CheckpointError
from elmo_engine.train.names import (MODEL_FORMAT, OPTIONS_FILE, SOFTMAX_FILE, STATE_DIR,
                                     STATE_FORMAT, STATE_JSON, STATE_TENSORS, TRAINING_FILE,
                                     VOCAB_FILE, WEIGHTS_FILE)
_EMBEDDED = "elmo_explorer_state"      # safetensors metadata key holding the state JSON


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def optimizer_tensors(opt: torch.optim.Optimizer) -> Tuple[Dict[str, Tensor], dict]:
    """Split an optimizer state dict into named tensors and JSON (hyperparameters, scalars)."""
    sd = opt.state_dict()
    tensors: Dict[str, Tensor] = {}
    scalars: Dict[str, dict] = {}
    for idx, st in sd["state"].items():
        for key, val in st.items():
            if isinstance(val, Tensor):
                tensors[f"optim.{idx}.{key}"] = val.detach().cpu().contiguous()
            else:
                scalars.setdefault(str(idx), {})[key] = val
    groups = [{k: (list(v) if isinstance(v, tuple) else v) for k, v in g.items()}
              for g in sd["param_groups"]]
    return tensors, {"param_groups": groups, "scalars": scalars}


def restore_optimizer(opt: torch.optim.Optimizer, tensors: Dict[str, Tensor], meta: dict) -> None:
    state: Dict[int, dict] = {}
    for name, t in tensors.items():
        if name.startswith("optim."):
            _, idx, key = name.split(".", 2)
            state.setdefault(int(idx), {})[key] = t
    for idx, d in meta.get("scalars", {}).items():
        state.setdefault(int(idx), {}).update(d)
    groups = [{k: (tuple(v) if k == "betas" else v) for k, v in g.items()}
              for g in meta["param_groups"]]
    opt.load_state_dict({"state": state, "param_groups": groups})


def save_state(out: Path, model: torch.nn.Module, opt: torch.optim.Optimizer,
               carry: List[Tuple[Tensor, Tensor]], generator: torch.Generator,
               info: dict) -> Path:
    """Write the resumable state (tensors then JSON, each atomically); return the JSON path.

    The tensors file also carries the JSON document (less its checksum) in its safetensors
    metadata, so a process killed between the two writes leaves a tensors file that
    :func:`load_state` can resume from on its own.
    """
    from safetensors.torch import save

    folder = Path(out) / STATE_DIR
    folder.mkdir(parents=True, exist_ok=True)
    tensors: Dict[str, Tensor] = {f"model.{k}": v.detach().cpu().contiguous()
                                  for k, v in model.state_dict().items()}
    opt_t, opt_meta = optimizer_tensors(opt)
    tensors.update(opt_t)
    for i, (c, h) in enumerate(carry):
        tensors[f"carry.{i}.c"] = c.detach().cpu().contiguous()
        tensors[f"carry.{i}.h"] = h.detach().cpu().contiguous()
    tensors["rng.train"] = generator.get_state()
    tensors["rng.torch"] = torch.get_rng_state()
    weights = folder / STATE_TENSORS
    doc = dict(info, format=STATE_FORMAT, version=1, optimizer=opt_meta)
    # serialised in memory: safetensors' save_file writes its own hidden temporary file, which a
    # killed process would leave behind
    blob = save(tensors, metadata={_EMBEDDED: json.dumps(doc)})
    atomic_write_bytes(weights, blob)
    doc["tensors_sha256"] = hashlib.sha256(blob).hexdigest()
    path = folder / STATE_JSON
    atomic_write_text(path, json.dumps(doc, indent=1) + "\n")
    return path


def load_state(out: Path) -> Tuple[dict, Dict[str, Tensor]]:
    """Read ``OUT/checkpoint``; :class:`CheckpointError` if missing, foreign or inconsistent."""
    from safetensors.torch import load_file

    folder = Path(out) / STATE_DIR
    path, weights = folder / STATE_JSON, folder / STATE_TENSORS
    if not path.is_file() or not weights.is_file():
        raise CheckpointError(folder, f"no training state to resume (expected {STATE_JSON} and "
                              f"{STATE_TENSORS}); start without --resume")
    from elmo_engine.files import read_bounded, utf8_text

    try:                     # a regular file of bounded size (a FIFO or a device is refused)
        doc = json.loads(utf8_text(read_bounded(path, MAX_STATE_JSON_BYTES)))
    except (OSError, ValueError, RecursionError) as e:   # ValueError: UTF-8, JSON, size
        raise CheckpointError(path, f"cannot read training state ({_short(e)})") from None
    if not isinstance(doc, dict) or doc.get("format") != STATE_FORMAT:
        raise CheckpointError(path, "not an ELMo Explorer training state", dataset="format",
                              expected=STATE_FORMAT, found=doc.get("format") if isinstance(doc, dict) else None)
    if doc.get("version") != 1:
        raise CheckpointError(path, "unsupported training state version", expected=1,
                              found=doc.get("version"))
    from elmo_engine.files import regular_file_problem

    problem = regular_file_problem(weights)          # before the checksum reads it
    if problem:
        raise CheckpointError(weights, problem)
    if _sha256(weights) != doc.get("tensors_sha256"):
        doc = _embedded_doc(weights)          # killed between the two writes: the newer state
        if doc is None:
            raise CheckpointError(weights, "training tensors do not match state.json (a write "
                                  "was interrupted or the file was changed)")
    try:
        tensors = load_file(str(weights))
    except Exception as e:
        raise CheckpointError(weights, f"cannot read training tensors ({e})") from None
    return doc, tensors


#: the largest ``state.json`` read (its history grows by a line per log step)
MAX_STATE_JSON_BYTES = 64 << 20
#: the fields a resumed run reads, and their types
_DOC_FIELDS: Dict[str, Union[type, Tuple[type, ...]]] = {
    "config": dict, "optimizer": dict, "step": int, "epoch": int, "window": int,
    "tokens": int, "train_seconds": (int, float), "history": dict}


def _short(e: Exception) -> str:
    text = str(e)
    return text if len(text) <= 200 else text[:200] + "…"


def check_document(doc: dict, path) -> None:
    """Every field a resumed run reads, with its type and range: :class:`CheckpointError`
    naming the field otherwise (a state missing ``history`` or with a string for
    ``train_seconds`` failed deep inside the trainer)."""
    import math

    for name, kind in _DOC_FIELDS.items():
        if name not in doc:
            raise CheckpointError(path, "training state lacks a field", dataset=name)
        v = doc[name]
        if isinstance(v, bool) or not isinstance(v, kind):
            raise CheckpointError(path, "training state field has the wrong type", dataset=name,
                                  expected=(kind.__name__ if isinstance(kind, type)
                                            else "a number"), found=type(v).__name__)
        if isinstance(v, (int, float)) and not (math.isfinite(v) and v >= 0):
            raise CheckpointError(path, "training state field out of range", dataset=name,
                                  expected=">= 0", found=_short(ValueError(v)))
    hist = doc["history"]
    for key in ("train", "dev"):
        if not isinstance(hist.get(key), list):
            raise CheckpointError(path, "training state history lacks a list",
                                  dataset=f"history.{key}")


def check_tensor_shapes(model_factory, tensors: Dict[str, Tensor], path) -> None:
    """Compare the state's model tensors with the shapes of the model its config describes,
    built on PyTorch's ``meta`` device (no memory), before the real model is built: a state
    whose config claims an enormous model is refused without allocating it."""
    with torch.device("meta"):
        own = {k: tuple(v.shape) for k, v in model_factory().state_dict().items()}
    sd = {k[len("model."):]: tuple(v.shape) for k, v in tensors.items()
          if k.startswith("model.")}
    if set(sd) != set(own):
        missing = sorted(set(own) - set(sd))
        raise CheckpointError(path, "training state does not match the model its config "
                              "describes", dataset=(missing or sorted(set(sd) - set(own)))[0])
    for k, shape in sd.items():
        if shape != own[k]:
            raise CheckpointError(path, "training state's config does not match its tensors",
                                  dataset=k, expected=own[k], found=shape)


def _embedded_doc(weights: Path) -> Optional[dict]:
    """The state document saved inside the tensors file's metadata, or None."""
    from safetensors import safe_open

    try:
        with safe_open(str(weights), framework="pt") as fh:
            text = (fh.metadata() or {}).get(_EMBEDDED)
        doc = json.loads(text) if text else None
    except Exception:
        return None
    ok = isinstance(doc, dict) and doc.get("format") == STATE_FORMAT and doc.get("version") == 1
    return doc if ok else None


def restore_model(model: torch.nn.Module, tensors: Dict[str, Tensor], path) -> None:
    sd = {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")}
    own = model.state_dict()
    if set(sd) != set(own):
        missing = sorted(set(own) - set(sd))
        raise CheckpointError(path, "training state does not match the model",
                              dataset=(missing or sorted(set(sd) - set(own)))[0])
    for k, v in sd.items():
        if tuple(v.shape) != tuple(own[k].shape):
            raise CheckpointError(path, "training state has a tensor of the wrong shape",
                                  dataset=k, expected=tuple(own[k].shape), found=tuple(v.shape))
    model.load_state_dict(sd)


def restore_carry(tensors: Dict[str, Tensor], n_layers: int) -> Optional[List[Tuple[Tensor, Tensor]]]:
    if "carry.0.c" not in tensors:
        return None
    return [(tensors[f"carry.{i}.c"], tensors[f"carry.{i}.h"]) for i in range(n_layers)]


SOFTMAX_FORMAT = "elmo-explorer-lm-softmax"


def export_model(bilm, out: Path, vocab, metadata: dict, extra_options: dict,
                 softmax: Optional[Tuple[Tensor, Tensor]] = None) -> Tuple[Path, Path]:
    """Write ``options.json`` + ``lm_weights.hdf5`` (published layout), ``vocab.txt``,
    ``training.json`` and, given ``softmax`` = (W (V, P), b (V,)), ``softmax.safetensors`` into
    ``out``."""
    out = Path(out)
    options, weights = save_published(bilm, out, options_name=OPTIONS_FILE,
                                      weights_name=WEIGHTS_FILE, extra_options=extra_options)
    vocab.save(out / VOCAB_FILE)
    if softmax is not None:
        save_softmax(out / SOFTMAX_FILE, *softmax)
    meta = dict(metadata, format=MODEL_FORMAT, weights_bytes=weights.stat().st_size,
                weights_sha256=_sha256(weights))
    atomic_write_text(out / TRAINING_FILE, json.dumps(meta, indent=2) + "\n")
    return options, weights


def save_softmax(path: Path, weight: Tensor, bias: Tensor) -> None:
    """The LM's output layer, for perplexity (``eval-lm``): W in float16 (half the bytes; the
    perplexity moves by under 0.1 %), b in float32. Published ELMo files leave it out."""
    from safetensors.torch import save

    blob = save({"softmax_w": weight.detach().cpu().to(torch.float16).contiguous(),
                 "softmax_b": bias.detach().cpu().float().contiguous()},
                metadata={"format": SOFTMAX_FORMAT})
    atomic_write_bytes(path, blob)


def load_softmax(path: Path, vocab_size: int, dim: int) -> Tuple[Tensor, Tensor]:
    """Read :func:`save_softmax`'s file, checking names, dtypes and shapes against the
    vocabulary (V) and the model's output width (P); :class:`CheckpointError` otherwise."""
    from safetensors import SafetensorError, safe_open

    path = Path(path)
    want = {"softmax_w": ((vocab_size, dim), (torch.float16, torch.float32)),
            "softmax_b": ((vocab_size,), (torch.float32,))}
    try:
        with safe_open(str(path), framework="pt") as fh:
            meta = fh.metadata() or {}
            if meta.get("format") != SOFTMAX_FORMAT:
                raise CheckpointError(path, "not an ELMo Explorer softmax file",
                                      dataset="format", expected=SOFTMAX_FORMAT,
                                      found=meta.get("format"))
            names = set(fh.keys())
            if names != set(want):
                raise CheckpointError(path, "unexpected tensors", expected=sorted(want),
                                      found=sorted(names))
            out = {}
            for name, (shape, dtypes) in want.items():
                sl = fh.get_slice(name)
                if tuple(sl.get_shape()) != shape:
                    raise CheckpointError(path, "the softmax does not match the vocabulary and "
                                          "the model", dataset=name, expected=list(shape),
                                          found=list(sl.get_shape()))
                t = fh.get_tensor(name)
                if t.dtype not in dtypes:
                    raise CheckpointError(path, "wrong dtype", dataset=name,
                                          expected=[str(d) for d in dtypes], found=str(t.dtype))
                out[name] = t.float()
    except (SafetensorError, OSError, ValueError) as e:
        raise CheckpointError(path, f"cannot read the softmax ({e})") from None
    if not all(bool(torch.isfinite(t).all()) for t in out.values()):
        raise CheckpointError(path, "the softmax holds NaN or infinite values")
    return out["softmax_w"], out["softmax_b"]
