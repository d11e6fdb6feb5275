"""The files a ``train-lm`` run writes into its model folder, and how a folder shows that a run
wrote it.

Named here, apart from :mod:`.state_io` (which writes them and imports torch), so that the
command line's refusals (:func:`elmo_engine.cli.train_lm.refuse_existing_model`) read the same
names before torch loads. A model folder holds the published layout (``options.json`` +
``lm_weights.hdf5``), the vocabulary, the softmax, the run's record ``training.json`` and the
resumable state ``checkpoint/``. ``--force`` replaces those files only in a folder that a run
wrote (:func:`not_written_by_train_lm`): one whose ``training.json`` or training state is ours.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from elmo_engine.files import parse_json_strict, read_bounded
from elmo_engine.model.locate import OWN_SOFTMAX, OWN_VOCAB, TRAINING_RECORD

OPTIONS_FILE = "options.json"
WEIGHTS_FILE = "lm_weights.hdf5"
VOCAB_FILE = OWN_VOCAB
SOFTMAX_FILE = OWN_SOFTMAX
#: the run's record (command, configuration, history, the weights' sha256), written last
TRAINING_FILE = TRAINING_RECORD
#: what ``training.json`` says it is (written since 2026-12-07; older records are known by
#: their keys, :func:`_is_training_record`)
MODEL_FORMAT = "elmo-explorer-lm-model"
STATE_DIR = "checkpoint"
STATE_JSON = "state.json"
STATE_TENSORS = "state.safetensors"
STATE_FORMAT = "elmo-explorer-lm-train-state"
#: every name a run writes at the top of its folder (the state folder included)
WRITTEN = (OPTIONS_FILE, WEIGHTS_FILE, VOCAB_FILE, SOFTMAX_FILE, TRAINING_FILE, STATE_DIR)
#: the largest record read to tell who wrote a folder (a long run's history is well under it)
MAX_RECORD_BYTES = 64 << 20


def _document(path: Path) -> Optional[dict]:
    try:
        doc = parse_json_strict(read_bounded(path, MAX_RECORD_BYTES))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return doc if isinstance(doc, dict) else None


def _is_training_record(doc: dict) -> bool:
    if doc.get("format") == MODEL_FORMAT:
        return True
    command = doc.get("command")                      # a record from before MODEL_FORMAT
    return (isinstance(command, str) and "train-lm" in command
            and isinstance(doc.get("config"), dict) and isinstance(doc.get("weights_sha256"), str))


def _only_a_runs_state(state_dir: Path) -> bool:
    """Whether ``state_dir`` is a folder holding only what a run writes there (the vocabulary
    it writes first, the state files, their temporaries): a run killed before its first
    checkpoint leaves that, and ``--resume`` has nothing to resume."""
    try:
        names = os.listdir(state_dir) if state_dir.is_dir() and not state_dir.is_symlink() else None
    except OSError:
        return False
    own = {VOCAB_FILE, STATE_JSON, STATE_TENSORS}
    return names is not None and all(
        n in own or (n.startswith(".") and n.endswith(".part")) for n in names)


def not_written_by_train_lm(folder) -> Optional[str]:
    """Why the files of :data:`WRITTEN` in ``folder`` may not be replaced by a fresh run, or
    None when they may: none is there, or ``training.json`` is a run's record, or
    ``checkpoint/state.json`` a run's training state (a run stopped before it exported), or
    ``checkpoint/`` alone holding nothing but a run's own files (one killed before its first
    state)."""
    folder = Path(folder)
    there = [name for name in WRITTEN if os.path.lexists(folder / name)]
    if not there:
        return None
    record = _document(folder / TRAINING_FILE)
    if record is not None and _is_training_record(record):
        return None
    state = _document(folder / STATE_DIR / STATE_JSON)
    if state is not None and state.get("format") == STATE_FORMAT:
        return None
    if there == [STATE_DIR] and _only_a_runs_state(folder / STATE_DIR):
        return None                # a run stopped before its first state (its vocabulary)
    return (f"{folder / there[0]} exists, and {folder} holds no record ({TRAINING_FILE}) or "
            "training state of train-lm: --force replaces only a model that train-lm wrote; "
            "choose another folder")


__all__ = ["MAX_RECORD_BYTES", "MODEL_FORMAT", "OPTIONS_FILE", "SOFTMAX_FILE", "STATE_DIR",
           "STATE_FORMAT", "STATE_JSON", "STATE_TENSORS", "TRAINING_FILE", "VOCAB_FILE",
           "WEIGHTS_FILE", "WRITTEN", "not_written_by_train_lm"]
