"""The workspace file: a saved analysis as documented, versioned JSON (never pickle).

A workspace holds the checkpoint (path and SHA-256), the sentences, the selected token, every
view's parameters (a JSON object per view, opaque here), and the probe runs with their results.
Large arrays, when there are any, go to a sibling ``<name>.<digest>.npz`` (loaded with
``allow_pickle=False``) that the JSON names. ``docs/guide/workspaces.md`` documents each field.

Saving is atomic: the npz is written first under a name derived from its content, then the JSON
replaces the old one in one rename, then npz files no longer named are removed. Loading checks
every key and type and raises :class:`InputError` naming the file and the key.

Autosave (:mod:`elmo_engine.io.recovery`): each app window writes its own autosave every minute
while there are unsaved changes and removes it on a clean exit; an autosave found at start-up
was left by a session that did not end cleanly, unless the workspace it belongs to was saved
after it.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import re
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

import numpy as np

from elmo_engine.atomic import atomic_write_bytes, atomic_write_text, check_name_fits
from elmo_engine.errors import InputError
from elmo_engine.files import lone_surrogate, shown, utf8_text
from elmo_engine.io.npz_lazy import LazyArrays, open_npz
from elmo_engine.io.writing import writing
from elmo_engine.model.tokenize import TOKENIZATIONS, Tokenization

FORMAT = "elmo-explorer-workspace"
VERSION = 1
SUFFIX = ".elmows.json"
#: the one autosave of versions before 2026-12-08 (now one per window: ``autosave-<pid>``)
AUTOSAVE_NAME = "autosave" + SUFFIX
#: the largest workspace JSON read (64 MiB; sentences and parameters, the arrays are separate)
MAX_WORKSPACE_BYTES = 64 << 20


@dataclass
class CheckpointRef:
    """The model a workspace was made with."""

    path: str
    checksum: str = ""                 # SHA-256 of options + weights ("" = unknown)
    name: str = ""
    device: str = "auto"
    precision: str = "fp32"


@dataclass
class WorkspaceData:
    """Everything a workspace file holds (see the module docstring)."""

    sentences: List[str] = field(default_factory=list)
    #: how the sentences are split into tokens (``model.tokenize.TOKENIZATIONS``): typed text,
    #: or "whitespace" for pretokenized text; a file without the key: typed text
    tokenization: str = "tokenize"
    checkpoint: Optional[CheckpointRef] = None
    selection: Optional[Dict[str, Any]] = None          # {"sentence", "token", "word"}
    views: Dict[str, dict] = field(default_factory=dict)
    probe_runs: List[dict] = field(default_factory=list)
    arrays: Mapping[str, np.ndarray] = field(default_factory=dict)   # loaded: a lazy mapping
    notes: str = ""
    saved_at: str = ""
    source: str = ""                   # autosaves: the explicitly saved file they belong to

    def to_json(self, arrays_file: Optional[str] = None) -> dict:
        """The JSON object (arrays are only named; :func:`save_workspace` writes them)."""
        ck = self.checkpoint
        return {
            "format": FORMAT, "version": VERSION,
            "saved_at": self.saved_at or _now(),
            "checkpoint": None if ck is None else {
                "path": ck.path, "checksum": ck.checksum, "name": ck.name,
                "device": ck.device, "precision": ck.precision},
            "sentences": list(self.sentences),
            "tokenization": self.tokenization,
            "selection": self.selection,
            "views": jsonable(self.views, "views"),
            "probe_runs": jsonable(self.probe_runs, "probe_runs"),
            "arrays": None if arrays_file is None else {
                "file": arrays_file,
                "keys": {k: {"shape": list(v.shape), "dtype": str(v.dtype)}
                         for k, v in sorted(self.arrays.items())}},
            "notes": self.notes,
            "source": self.source,
            "session": {"pid": os.getpid(), "host": _host()},
        }


@dataclass
class LoadedWorkspace:
    """A loaded workspace and what the GUI should ask or warn about.

    Attributes
    ----------
    data : the content
    path : the file read
    checkpoint_path : where the checkpoint is now (the saved path, or the same relative place
        next to the workspace), None when it was not found
    checkpoint_missing : the workspace names a checkpoint that is not there (ask for it)
    checksum_mismatch : the checkpoint there has another checksum than when saved (warn)
    session : ``{"pid", "host"}`` of the session that wrote the file
    """

    data: WorkspaceData
    path: Path
    checkpoint_path: Optional[str] = None
    checkpoint_missing: bool = False
    checksum_mismatch: bool = False
    session: Dict[str, Any] = field(default_factory=dict)


def jsonable(obj: Any, where: str) -> Any:
    """A copy of ``obj`` that JSON can hold: NumPy scalars/arrays → numbers/lists, tuples →
    lists, NaN/±inf → null. Anything else (a widget, a set, bytes) raises :class:`InputError`
    naming the key."""
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, (int, np.integer)) and not isinstance(obj, bool):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return float(obj) if np.isfinite(obj) else None
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist(), where)
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if not isinstance(k, str):
                raise InputError(f"key '{where}' has a non-text key {k!r}; use strings")
            out[k] = jsonable(v, f"{where}.{k}")
        return out
    if isinstance(obj, (list, tuple)):
        return [jsonable(v, f"{where}[{i}]") for i, v in enumerate(obj)]
    raise InputError(f"key '{where}' holds a {type(obj).__name__}, which a workspace cannot store")


# ---- saving -------------------------------------------------------------------------------
def save_workspace(path, data: WorkspaceData) -> Path:
    """Write ``data`` to ``path`` (JSON) and its arrays to a sibling npz, atomically.

    Raises :class:`~elmo_engine.io.writing.ExportError` naming the file on a failed write
    (disk full, no permission); the previous workspace file is then left as it was.
    """
    path = Path(path)
    for key, arr in data.arrays.items():
        if not isinstance(arr, np.ndarray) or arr.dtype == object:
            raise InputError(f"workspace array '{key}' must be a numeric NumPy array", path=path)
    arrays_name = None
    blob = b""
    if data.arrays:
        buf = io.BytesIO()
        np.savez(buf, allow_pickle=False, **data.arrays)
        blob = buf.getvalue()
        arrays_name = f"{_stem(path)}.{hashlib.sha256(blob).hexdigest()[:12]}.npz"
        check_name_fits(path.with_name(arrays_name), of=path)   # before anything is written
    doc = data.to_json(arrays_name)
    text = json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=False)
    if lone_surrogate(text) is not None:   # a file name whose bytes are not UTF-8, say
        raise InputError(f"cannot be saved: {_lone_surrogate_in(doc)}; nothing was written "
                         "(rename the file it names)", path=path)
    new_npz: Optional[Path] = None
    if arrays_name is not None:
        npz = path.with_name(arrays_name)
        if not npz.exists():
            with writing(npz):
                atomic_write_bytes(npz, blob)
            new_npz = npz
    try:
        with writing(path):
            atomic_write_text(path, text + "\n")
    except BaseException:
        if new_npz is not None:
            new_npz.unlink(missing_ok=True)
        raise
    _remove_stale_arrays(path, arrays_name)
    return path


def _stem(path: Path) -> str:
    name = path.name
    return name[:-len(SUFFIX)] if name.endswith(SUFFIX) else path.stem


def arrays_files(path: Path) -> List[Path]:
    """The arrays files saves of the workspace ``path`` wrote beside it,
    ``<stem>.<12 hex digits>.npz`` (the current one and stale ones)."""
    stem = _stem(path)
    own = re.compile(re.escape(stem) + r"\.[0-9a-f]{12}\.npz")
    return sorted(f for f in path.parent.glob(f"{stem}.*.npz") if own.fullmatch(f.name))


def _remove_stale_arrays(path: Path, keep: Optional[str]) -> None:
    for f in arrays_files(path):
        if f.name != keep:
            try:
                f.unlink()
            except OSError:
                pass                                   # a leftover is harmless; the JSON names its own


# ---- loading ------------------------------------------------------------------------------
def load_workspace(path, verify_checksum: bool = True) -> LoadedWorkspace:
    """Read and validate a workspace; locate its checkpoint and compare its checksum.

    Raises
    ------
    InputError : not a workspace, a newer version, a missing key or a wrong type (the message
        names the file and the key)
    """
    from elmo_engine.io.datasets.textio import check_regular_file

    path = Path(path)
    check_regular_file(path)                 # a FIFO or a device is refused, not read
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_WORKSPACE_BYTES + 1)
    except OSError as e:
        raise InputError(f"cannot read the workspace ({e.strerror or e})", path=path) from None
    if len(raw) > MAX_WORKSPACE_BYTES:
        raise InputError(f"larger than {MAX_WORKSPACE_BYTES} bytes: not a workspace this tool "
                         "reads (arrays belong in its npz)", path=path)
    try:
        text = utf8_text(raw, bom=True)                  # a BOM (Windows editors) is dropped
    except ValueError as e:
        raise InputError(f"not a workspace file: {e}", path=path) from None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        line = getattr(e, "lineno", None)
        raise InputError(f"not a valid JSON workspace file ({e})", path=path, line=line) from None
    except ValueError as e:              # a number over Python's 4300-digit conversion limit
        raise InputError(f"not a valid JSON workspace file ({e})", path=path) from None
    except RecursionError:
        raise InputError("not a valid JSON workspace file (nested too deeply)", path=path) from None
    if _SURROGATE_ESCAPE.search(raw):      # UTF-8 holds none; only a JSON escape makes one
        _refuse_lone_surrogates(obj, path)
    data, session = _parse(obj, path)
    loaded = LoadedWorkspace(data, path, session=session)
    if data.checkpoint is not None and data.checkpoint.path:
        loaded.checkpoint_path = locate_checkpoint(data.checkpoint.path, path)
        loaded.checkpoint_missing = loaded.checkpoint_path is None
        if verify_checksum and loaded.checkpoint_path and data.checkpoint.checksum:
            loaded.checksum_mismatch = checkpoint_checksum(loaded.checkpoint_path) \
                != data.checkpoint.checksum
    return loaded


def locate_checkpoint(saved: str, workspace_path: Path) -> Optional[str]:
    """The saved checkpoint path if it exists; else a relative one resolved beside the workspace."""
    p = Path(saved)
    if p.exists():
        return str(p)
    if not p.is_absolute() and (workspace_path.parent / p).exists():
        return str(workspace_path.parent / p)
    return None


def checkpoint_checksum(path) -> str:
    """SHA-256 of a checkpoint's options and weights files, as ``CheckpointInfo.checksum``.

    Returns "" when the files cannot be resolved (the loader will then say what is wrong).
    """
    from elmo_engine.model.header import file_checksum, resolve_checkpoint
    from elmo_engine.errors import ElmoError

    try:
        _fmt, opts, weights = resolve_checkpoint(path)
        return file_checksum(opts, weights)
    except (ElmoError, OSError):
        return ""


def _type_name(v: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "true/false",
            int: "a number", float: "a number", type(None): "null"}.get(type(v), type(v).__name__)


#: a JSON escape of a surrogate (``\\ud800`` … ``\\udfff``): a pair or a lone one
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _lone_surrogate_in(obj: Any) -> Optional[str]:
    """Where a string of the JSON value ``obj`` holds a lone surrogate — a JSON ``"\\udcff"``
    escape, or a file name whose bytes are not UTF-8 — said in words, or None."""
    stack: List[tuple] = [(obj, "")]
    while stack:
        value, where = stack.pop()
        if isinstance(value, str):
            i = lone_surrogate(value)
            if i is not None:
                return (f"'{where or 'the document'}' holds U+{ord(value[i]):04X} at character "
                        f"{i + 1} ('{shown(value[max(0, i - 20):i + 20], one_line=True)}'), "
                        "half of a character (a lone surrogate), not text")
        elif isinstance(value, dict):
            for k, v in value.items():
                stack.append((k, where))
                stack.append((v, f"{where}.{shown(k)}" if where else shown(k)))
        elif isinstance(value, list):
            stack.extend((v, f"{where}[{j}]") for j, v in enumerate(value))
    return None


def _refuse_lone_surrogates(obj: Any, path: Path) -> None:
    """Refuse a workspace whose strings hold a lone surrogate (no file holds it as UTF-8):
    taken, it was embedded as it was, shown without it (Qt drops it), and made the next save
    fail. One line naming the key and the character."""
    problem = _lone_surrogate_in(obj)
    if problem:
        raise InputError(f"{problem}; nothing was opened", path=path)


def _need(obj: dict, key: str, kind, path: Path, where: str = "", optional: bool = False):
    name = f"{where}{key}"
    if key not in obj:
        if optional:
            return None
        raise InputError(f"key '{name}' is missing", path=path)
    v = obj[key]
    if optional and v is None:
        return None
    ok = isinstance(v, kind) and not (kind in (int, (int, float)) and isinstance(v, bool))
    if not ok:
        want = {dict: "an object", list: "a list", str: "a string", int: "an integer",
                (int, float): "a number"}.get(kind, str(kind))
        raise InputError(f"key '{name}' must be {want}, found {_type_name(v)}", path=path)
    return v


def _parse(obj: Any, path: Path):
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        raise InputError(f"not an ELMo Explorer workspace (key 'format' must be \"{FORMAT}\")",
                         path=path)
    version = _need(obj, "version", int, path)
    if version > VERSION:
        raise InputError(f"key 'version' is {version}: this workspace was written by a newer "
                         f"ELMo Explorer; this one reads version {VERSION}", path=path)
    if version < 1:
        raise InputError(f"key 'version' is {version}; versions start at 1", path=path)
    sentences = _need(obj, "sentences", list, path)
    for i, s in enumerate(sentences):
        if not isinstance(s, str):
            raise InputError(f"key 'sentences[{i}]' must be a string, found {_type_name(s)}",
                             path=path)
    data = WorkspaceData(sentences=sentences)
    saved = _need(obj, "tokenization", str, path, optional=True) or Tokenization.TYPED
    try:
        data.tokenization = Tokenization.parse(saved).value
    except ValueError:
        raise InputError(f"key 'tokenization' must be one of {', '.join(TOKENIZATIONS)}, found "
                         f"{saved!r}", path=path) from None
    ck = _need(obj, "checkpoint", dict, path, optional=True)
    if ck is not None:
        data.checkpoint = CheckpointRef(
            path=_need(ck, "path", str, path, "checkpoint."),
            checksum=_need(ck, "checksum", str, path, "checkpoint.", optional=True) or "",
            name=_need(ck, "name", str, path, "checkpoint.", optional=True) or "",
            device=_need(ck, "device", str, path, "checkpoint.", optional=True) or "auto",
            precision=_need(ck, "precision", str, path, "checkpoint.", optional=True) or "fp32")
    sel = _need(obj, "selection", dict, path, optional=True)
    if sel is not None:
        s = _need(sel, "sentence", int, path, "selection.")
        t = _need(sel, "token", int, path, "selection.")
        if s < 0 or t < 0 or s >= len(sentences):
            raise InputError(f"key 'selection' names token {t} of sentence {s}, but the "
                             f"workspace has {len(sentences)} sentences", path=path)
        word = _need(sel, "word", str, path, "selection.", optional=True) or ""
        data.selection = {"sentence": s, "token": t, "word": word}
    views = _need(obj, "views", dict, path, optional=True) or {}
    for name, v in views.items():
        if not isinstance(v, dict):
            raise InputError(f"key 'views.{name}' must be an object, found {_type_name(v)}",
                             path=path)
    data.views = views
    runs = _need(obj, "probe_runs", list, path, optional=True) or []
    for i, r in enumerate(runs):
        if not isinstance(r, dict):
            raise InputError(f"key 'probe_runs[{i}]' must be an object, found {_type_name(r)}",
                             path=path)
    _check_parts(views, runs, path)
    data.probe_runs = runs
    data.notes = _need(obj, "notes", str, path, optional=True) or ""
    data.saved_at = _need(obj, "saved_at", str, path, optional=True) or ""
    data.source = _need(obj, "source", str, path, optional=True) or ""
    arrays = _need(obj, "arrays", dict, path, optional=True)
    if arrays is not None:
        data.arrays = _load_arrays(path, arrays)
    session = _need(obj, "session", dict, path, optional=True) or {}
    return data, session


def _load_arrays(path: Path, spec: dict) -> "LazyArrays":
    name = _need(spec, "file", str, path, "arrays.")
    keys = _need(spec, "keys", dict, path, "arrays.")
    if Path(name).name != name or name in ("", ".", "..") or "\0" in name:
        raise InputError(f"key 'arrays.file' must be a file name beside the workspace, found "
                         f"'{name}'", path=path)
    if len(name.encode("utf-8", "surrogatepass")) > 255:
        raise InputError(f"key 'arrays.file' is not a usable file name ({len(name)} characters)",
                         path=path)
    npz = path.with_name(name)
    try:                                 # headers checked against the file; data read lazily
        out = open_npz(npz)
    except FileNotFoundError:
        raise InputError(f"the arrays file '{name}' named by key 'arrays.file' is missing "
                         "(keep it beside the workspace)", path=path) from None
    for k, meta in keys.items():
        if k not in out:
            raise InputError(f"array '{k}' listed in key 'arrays.keys' is not in the file",
                             path=npz)
        if isinstance(meta, dict) and list(out.shape(k)) != meta.get("shape"):
            raise InputError(f"array '{k}' has shape {list(out.shape(k))}, the workspace says "
                             f"{_show(meta.get('shape'))}", path=npz)
    return out


def _show(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 120 else text[:120] + f"… ({len(text)} characters)"


def _check_parts(views: dict, runs: list, path: Path) -> None:
    """Views and probe runs nested at most 32 levels (what reads them later may recurse); each
    probe run is checked field by field where it becomes a result (``ProbeResult.from_dict``)."""
    from elmo_engine.io.probe_result_check import ResultFormatError, check_depth

    try:
        check_depth(views, "views")
        check_depth(runs, "probe_runs")
    except ResultFormatError as e:
        raise InputError(str(e), path=path) from None


def _host() -> str:
    try:
        return os.uname().nodename
    except AttributeError:  # pragma: no cover - Windows
        return os.environ.get("COMPUTERNAME", "")


def _now() -> str:
    return datetime.fromtimestamp(time.time(), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


__all__ = ["AUTOSAVE_NAME", "CheckpointRef", "FORMAT", "LoadedWorkspace", "SUFFIX", "VERSION",
           "WorkspaceData", "checkpoint_checksum", "load_workspace", "locate_checkpoint",
           "save_workspace"]
