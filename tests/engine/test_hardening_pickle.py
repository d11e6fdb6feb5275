"""Loading never runs code from a file: no unpickling anywhere, and pickle files are refused.

The hostile files here carry a real payload (unpickling them would create a marker file), so a
loader that did unpickle would be caught even if it then failed.
"""
from __future__ import annotations

import ast
import builtins
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest

from elmo_engine.model.checkpoint import load_checkpoint, save_native
from elmo_engine.embed.embedder import Embedder
from elmo_engine.errors import CheckpointError

from support import FIXTURES, REPO

# call names that deserialise objects (and so can run code); built by joining so that this file
# does not match its own scan
UNSAFE_CALLS = {("pickle", "load" + "s"), ("pickle", "load"), ("torch", "load"),
                ("joblib", "load"), ("dill", "load"), ("dill", "load" + "s"), ("marshal", "load" + "s"),
                ("marshal", "load"), ("shelve", "open"), ("pd", "read_" + "pickle"),
                ("pandas", "read_" + "pickle"), ("yaml", "unsafe_load"), ("cPickle", "load"),
                ("_pickle", "load"), ("Unpickler", None)}
NUMPY = {"np", "numpy"}


def _sources():
    skip = {".git", ".venv", "venv", "build", "dist", "node_modules", "__pycache__"}
    for f in sorted(REPO.rglob("*.py")):
        rel = f.relative_to(REPO)
        if not any(part in skip or part.endswith(".egg-info") or part.startswith(".venv")
                   for part in rel.parts):
            yield f, rel


def _unsafe_calls(tree: ast.AST):
    """(line, description) of every call that may unpickle."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            owner = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
                else None
            attr = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
            if (owner, attr) in UNSAFE_CALLS or (attr, None) in UNSAFE_CALLS:
                yield node.lineno, f"{owner}.{attr}(…)" if owner else f"{attr}(…)"
            if owner in NUMPY and attr == "load":
                kw = {k.arg: k.value for k in node.keywords}
                flag = kw.get("allow_pickle")
                if not (isinstance(flag, ast.Constant) and flag.value is False):
                    yield node.lineno, "np.load without allow_pickle=False"
            for k in node.keywords:
                if k.arg == "allow_pickle" and not (isinstance(k.value, ast.Constant)
                                                   and k.value.value is False):
                    if owner in NUMPY and attr in ("save", "savez", "savez_compressed"):
                        continue                        # writing never executes anything
                    yield node.lineno, f"allow_pickle={ast.unparse(k.value)}"
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names]
            module = getattr(node, "module", None) or ""
            if module in ("pickle", "dill", "joblib", "marshal", "shelve") and any(
                    n.startswith("load") or n == "Unpickler" for n in names):
                yield node.lineno, f"from {module} import {', '.join(names)}"


def test_no_source_file_unpickles_or_torch_loads():
    found, scanned = [], 0
    for f, rel in _sources():
        scanned += 1
        for line, what in _unsafe_calls(ast.parse(f.read_text(encoding="utf-8"), str(rel))):
            found.append(f"{rel}:{line}: {what}")
    assert scanned > 40, f"only {scanned} Python files found under {REPO}"
    assert not found, "code that can unpickle:\n" + "\n".join(found)


def test_the_scan_finds_what_it_looks_for():
    bad = ("import numpy as np, pickle, torch\n"
           "a = pickle.load" + "s(b'')\n"
           "b = torch.load('x.pt')\n"
           "c = np.load('x.npy')\n"
           "d = np.load('x.npy', allow_pickle=True)\n"
           "e = np.load('x.npy', allow_pickle=False)\n")
    lines = sorted(line for line, _ in _unsafe_calls(ast.parse(bad)))
    assert lines == [2, 3, 4, 5, 5]


# ---- hostile files -----------------------------------------------------------------------------
class _Payload:
    """Unpickling this creates ``marker``: proof that a loader ran code from the file."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return builtins.open, (self.marker, "w")


@pytest.fixture()
def hostile(tmp_path):
    marker = tmp_path / "PWNED"
    blob = pickle.dumps({"state_dict": _Payload(marker)}, protocol=2)
    yield blob, marker
    assert not marker.exists(), "a loader unpickled a file"


@pytest.mark.parametrize("name", ["model.pt", "weights.pth", "pytorch_model.bin", "last.ckpt",
                                  "elmo.pkl", "model.pickle"])
def test_pickle_checkpoints_are_refused_with_a_reason(tmp_path, hostile, name):
    blob, _ = hostile
    f = tmp_path / name
    f.write_bytes(blob)
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(f)
    msg = str(e.value)
    assert name in msg and "pickle" in msg and "can run code" in msg
    assert "safetensors" in msg and "options.json" in msg


def test_folder_with_only_a_pickle_says_why(tmp_path, hostile):
    blob, _ = hostile
    (tmp_path / "pytorch_model.bin").write_bytes(blob)
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(CheckpointError, match="only pickle files.*can run code"):
        load_checkpoint(tmp_path)


def test_pickle_renamed_as_checkpoint_files(tmp_path, hostile):
    blob, _ = hostile
    src = FIXTURES / "allennlp"
    pub = tmp_path / "pub"
    pub.mkdir()
    shutil.copy(src / "options.json", pub / "options.json")
    (pub / "lm_weights.hdf5").write_bytes(blob)
    with pytest.raises(CheckpointError, match="not an HDF5 file"):
        load_checkpoint(pub)
    shutil.copy(src / "lm_weights.hdf5", pub / "lm_weights.hdf5")
    (pub / "options.json").write_bytes(blob)
    with pytest.raises(CheckpointError, match="not valid UTF-8|not valid JSON"):
        load_checkpoint(pub)

    nat = tmp_path / "nat"
    save_native(load_checkpoint(src), nat)
    good_cfg = (nat / "bilm.json").read_bytes()
    (nat / "bilm.safetensors").write_bytes(blob)
    with pytest.raises(CheckpointError, match="safetensors"):
        load_checkpoint(nat)
    with pytest.raises(CheckpointError, match="safetensors"):
        load_checkpoint(nat / "bilm.safetensors")
    (nat / "bilm.json").write_bytes(blob)
    with pytest.raises(CheckpointError, match="model config"):
        load_checkpoint(nat)
    assert good_cfg                                    # the good config existed before


def test_pickles_in_the_activation_cache_are_dropped_not_loaded(tmp_path, hostile):
    blob, _ = hostile
    model = load_checkpoint(FIXTURES / "allennlp")
    sents = [["the", "bank"], ["a", "river", "bank"]]
    expected = Embedder(model).embed(sents)
    Embedder(model, cache_dir=tmp_path / "cache").embed(sents)
    entries = sorted((tmp_path / "cache").rglob("*.npy"))
    assert len(entries) == 2
    entries[0].write_bytes(blob)                      # a raw pickle under the .npy name
    with open(entries[1], "wb") as fh:                # an .npy holding a pickled object array
        np.save(fh, np.array([_Payload(tmp_path / "PWNED")], dtype=object), allow_pickle=True)
    emb = Embedder(model, cache_dir=tmp_path / "cache")
    got = emb.embed(sents)
    assert emb.stats["sentence_misses"] == 2          # both entries were refused and recomputed
    for a, b in zip(expected, got):
        np.testing.assert_array_equal(a, b)
    for f in entries:                                 # and rewritten as plain arrays
        assert np.load(f, allow_pickle=False).dtype == np.float32
