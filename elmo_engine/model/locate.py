"""Where a checkpoint's files are: :func:`resolve_checkpoint` finds the options (or config) file
and the weights file of a folder or of either file, by name only.

Apart from :mod:`.checkpoint` (which loads them) so that a caller that needs only the paths —
the command line's check that no output replaces an input (:mod:`elmo_engine.cli.outputs`) —
reads no numpy and no torch.
"""
from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Optional, Tuple

from elmo_engine.errors import CheckpointError

NATIVE_CONFIG = "bilm.json"
NATIVE_WEIGHTS = "bilm.safetensors"
#: the softmax beside a model's weights (:mod:`.softmax` reads it): ours (written by
#: ``train-lm``) and the published layout's file pattern
OWN_SOFTMAX = "softmax.safetensors"
OWN_VOCAB = "vocab.txt"
#: the record ``train-lm`` writes beside a model it trained (:mod:`elmo_engine.train.names`)
TRAINING_RECORD = "training.json"
PUBLISHED_SOFTMAX_PATTERN = "*softmax_weights.hdf5"
PICKLE_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt", ".pkl", ".pickle", ".th", ".mdl")
PICKLE_REFUSAL = ("PyTorch pickle checkpoints are not loaded because unpickling a file can run "
                  "code; convert it to the published layout (options.json + weights .hdf5) or "
                  "to safetensors (bilm.json + bilm.safetensors)")


def resolve_checkpoint(path) -> Tuple[str, Path, Path]:
    """Find (format, options/config path, weights path) for a directory or either file."""
    path = Path(path).expanduser()
    if not path.exists():
        why = "no such file or directory"
        try:
            os.stat(path)
        except OSError as e:            # a link loop, a link to nothing, a folder not entered
            if e.errno == errno.ELOOP:
                why = "a loop of symbolic links"
            elif path.is_symlink():
                why = "a symbolic link to nothing (its target does not exist)"
            elif e.errno != errno.ENOENT:
                why = f"cannot be looked at ({e.strerror or e})"
        raise CheckpointError(path, why)
    if path.is_file() and path.suffix.lower() in PICKLE_SUFFIXES:
        raise CheckpointError(path, PICKLE_REFUSAL)
    if path.is_dir():
        if (path / NATIVE_CONFIG).is_file() and (path / NATIVE_WEIGHTS).is_file():
            return "native", path / NATIVE_CONFIG, path / NATIVE_WEIGHTS
        if (not any(path.glob("*.hdf5")) and not any(path.glob("*.h5"))
                and any(f.suffix.lower() in PICKLE_SUFFIXES for f in path.iterdir())):
            raise CheckpointError(path, "no options .json + weights .hdf5 here, only pickle files; "
                                  + PICKLE_REFUSAL)
        options = _pick(path, "*.json", path, "an options .json file",
                        prefer=("options.json",),
                        avoid=("sentences", "vocab", "config", "train_state", "manifest"))
        weights = _pick(path, "*.hdf5", path, "a weights .hdf5 file", also="*.h5",
                        prefer=("lm_weights.hdf5", "weights.hdf5"),
                        avoid=("lm_embeddings", "embeddings", "vectors", "softmax"))
        return "published", options, weights
    if path.name == NATIVE_CONFIG or path.suffix == ".safetensors":
        cfg = path.parent / NATIVE_CONFIG
        weights = path if path.suffix == ".safetensors" else path.parent / NATIVE_WEIGHTS
        if not cfg.is_file() or not weights.is_file():
            raise CheckpointError(path, f"a native checkpoint needs both {NATIVE_CONFIG} and "
                                  f"{NATIVE_WEIGHTS} in {path.parent}")
        return "native", cfg, weights
    if path.suffix.lower() == ".json":
        weights = _pick(path.parent, "*.hdf5", path, "a weights .hdf5 file beside the options",
                        also="*.h5", prefer=("lm_weights.hdf5", "weights.hdf5"),
                        avoid=("lm_embeddings", "embeddings", "vectors", "softmax"))
        return "published", path, weights
    if path.suffix.lower() in (".hdf5", ".h5"):
        options = _pick(path.parent, "*.json", path, "an options .json file beside the weights",
                        prefer=("options.json", path.stem + "_options.json",
                                path.stem.replace("weights", "options") + ".json"),
                        avoid=("sentences", "vocab", "config", "train_state", "manifest"))
        return "published", options, path
    raise CheckpointError(path, "not a checkpoint: open a folder, an options .json, a weights "
                          ".hdf5 or a .safetensors file")


def _pick(folder: Path, pattern: str, asked, what: str, also: Optional[str] = None,
          prefer=(), avoid=()) -> Path:
    files = sorted(folder.glob(pattern)) + (sorted(folder.glob(also)) if also else [])
    files = [f for f in files if f.is_file()]
    for name in prefer:
        for f in files:
            if f.name == name:
                return f
    candidates = [f for f in files if not any(a in f.name for a in avoid)]
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise CheckpointError(asked, f"cannot find {what} in {folder}")
    raise CheckpointError(asked, f"several candidates for {what} in {folder}: "
                          + ", ".join(f.name for f in candidates) + "; open one file directly")
