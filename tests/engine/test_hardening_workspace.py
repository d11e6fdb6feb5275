"""Hardening of workspaces and training state: fuzzed workspace files, and processes killed
(SIGKILL) at random moments while a workspace or a training state is saved.

(a) Every corrupted version of a valid saved workspace (truncation, flipped bytes, JSON values
swapped into keys, wrong types, deep nesting, huge numbers, non-UTF-8, a 10 MB line) ends in the
engine's :class:`InputError` naming the file, or in a correct load. Derandomized and short in CI
(``ELMO_FUZZ_EXAMPLES``, default 100); longer by hand, e.g.
``ELMO_FUZZ_EXAMPLES=2000 pytest tests/engine/test_hardening_workspace.py -k fuzz``.

(b) After each kill the workspace (JSON + npz) or ``checkpoint/state.*`` is the old or the new
complete save, never a corrupt one; what is left over is a hidden ``.NAME.*.part`` file (and,
for a workspace, an npz no JSON names, which the next save removes). ``ELMO_KILL_TRIALS`` trials
per target (default 3), seeded delays.
"""
from __future__ import annotations

import json
import os
import random
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

import test_hardening_faults as faults
from elmo_engine.atomic import cleanup_stale_parts
from elmo_engine.errors import CheckpointError, ElmoError, InputError
from elmo_engine.train import state_io
from elmo_engine.io.workspace_file import (CheckpointRef, WorkspaceData, load_workspace,
                                           save_workspace)

from support import json_paths, json_values, mutate_json
from helpers_kill_state import StateForkServer, workspace_data

EXAMPLES = int(os.environ.get("ELMO_FUZZ_EXAMPLES", "100"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
TEN_MB = 10 * 1024 * 1024


# ---- (a) fuzzing load_workspace -------------------------------------------------------------
def _probe_run() -> dict:
    score = {"dev": 0.5, "test": 0.75, "macro_f1": 0.4}
    return {"task": "pos", "name": "run", "label": "upos", "model": "tiny",
            "layers": [{"layer": k, **score, "per_label": {}} for k in range(2)],
            "mix": {"weights": [0.4, 0.6], "gamma": 1.0, **score}, "baselines": {"majority": 0.1},
            "counts": {"train": 2, "dev": 1, "test": 1, "labels": 2}, "config": {}, "history": {}}


def _valid() -> WorkspaceData:
    return WorkspaceData(
        sentences=["The bank of the river .", "She paid the bank ."],
        checkpoint=CheckpointRef(path="no-such-model", checksum="ab" * 32, name="tiny"),
        selection={"sentence": 1, "token": 3, "word": "bank"},
        views={"projection": {"method": "pca", "layer": 1, "colors": [1, 2.5, None]},
               "contexts": {"k": 10}},
        probe_runs=[_probe_run()],
        arrays={"points": np.arange(12, dtype=np.float32).reshape(6, 2),
                "ids": np.arange(3, dtype=np.int64)},
        notes="notes ü", saved_at="2026-01-01T00:00:00Z")


@pytest.fixture(scope="module")
def fuzz_ws(tmp_path_factory):
    path = tmp_path_factory.mktemp("wsfuzz") / "fuzz.elmows.json"
    save_workspace(path, _valid())
    return path, path.read_bytes()


ORIGINAL = _valid().to_json("fuzz.000000000000.npz")


ALL_PATHS = list(json_paths(ORIGINAL))
leaf = st.one_of(
    st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70),
    st.sampled_from([0, -1, 1, 2, 10 ** 30, 1 << 63]), st.floats(allow_nan=False),
    st.text(max_size=12),
    st.sampled_from(["", ".", "..", "/etc/passwd", "fuzz.elmows.json", "a\x00b", "x.npz"]))
json_value = json_values(leaf)
SPLICES = [b"{\"views\": " + b"{\"v\": " * 900, b"\xff", b"\xc3", b"\x00", b"\xef\xbb\xbf", b"\"\\ud800\"",
           b"9" * 5000, b"1e999",
           b"-0", b"NaN", b"[" * 3000, b"{\"a\":" * 2000, b"[" * 500 + b"]" * 500, b"}", b",",
           b"\"", b"\"" + b"a" * TEN_MB + b"\"", b" " * TEN_MB, b"\n" * 50]


@st.composite
def corrupted(draw, original: bytes) -> bytes:
    """A damaged workspace: JSON-level edits, then byte-level splices, flips and truncation."""
    text = original
    if draw(st.booleans()):
        doc = mutate_json(draw, json.loads(original), ALL_PATHS, json_value)
        text = json.dumps(doc).encode()
    for _ in range(draw(st.integers(0, 2))):
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(SPLICES)) + text[at:]
    if draw(st.booleans()):
        buf = bytearray(text)
        for _ in range(draw(st.integers(1, 4))):
            if buf:
                buf[draw(st.integers(0, len(buf) - 1))] ^= 1 << draw(st.integers(0, 7))
        text = bytes(buf)
    if draw(st.booleans()):
        text = text[:draw(st.integers(0, len(text)))]
    return text


def _check_loaded(ws) -> None:
    """A load that succeeded must hand over well-typed content."""
    d = ws.data
    assert all(isinstance(s, str) for s in d.sentences)
    if d.selection is not None:
        assert 0 <= d.selection["sentence"] < len(d.sentences) and d.selection["token"] >= 0
    assert all(isinstance(v, dict) for v in d.views.values())
    assert all(isinstance(r, dict) for r in d.probe_runs)
    assert all(isinstance(a, np.ndarray) and a.dtype != object for a in d.arrays.values())
    assert isinstance(d.notes, str) and isinstance(ws.session, dict)


def test_fuzz_the_valid_file_loads(fuzz_ws):
    path, original = fuzz_ws
    ws = load_workspace(path, verify_checksum=False)
    _check_loaded(ws)
    assert ws.data.sentences == _valid().sentences and ws.checkpoint_missing
    np.testing.assert_array_equal(ws.data.arrays["points"], _valid().arrays["points"])


def _lying_npz(npz: Path, original: bytes, shape, descr: str) -> None:
    """Rewrite the npz's 'points' member with a header declaring ``shape`` / ``descr`` (issue
    18: a header that lies about its shape must be refused before anything is allocated)."""
    import io
    import zipfile

    with zipfile.ZipFile(io.BytesIO(original)) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    head = io.BytesIO()
    np.lib.format.write_array_header_1_0(head, {"descr": descr, "fortran_order": False,
                                               "shape": tuple(shape)})
    fp = io.BytesIO(members["points.npy"])
    np.lib.format.read_magic(fp)
    np.lib.format.read_array_header_1_0(fp)
    members["points.npy"] = head.getvalue() + members["points.npy"][fp.tell():]
    with zipfile.ZipFile(npz, "w") as zf:
        for n, b in members.items():
            zf.writestr(n, b)


@FUZZ
@given(data=st.data())
@example(data=None)                                   # a single 10 MB line
def test_fuzz_load_workspace(fuzz_ws, data):
    path, original = fuzz_ws
    npz = path.with_name(json.loads(original)["arrays"]["file"])
    npz_original = npz.read_bytes()
    if data is None:
        text = b"{\"format\": \"" + b"x" * TEN_MB + b"\"}"
    else:
        text = data.draw(corrupted(original))
        if data.draw(st.integers(0, 4)) == 0:          # now and then: a lying .npy header
            shape = data.draw(st.lists(st.sampled_from([0, 1, 2, 6, 12, 10 ** 6, 10 ** 10]),
                                       max_size=3))
            _lying_npz(npz, npz_original, shape, data.draw(st.sampled_from(["<f4", "<f8", "|O"])))
        else:
            text = original if data.draw(st.integers(0, 9)) == 0 else text
    path.write_bytes(text)
    try:
        ws = load_workspace(path, verify_checksum=False)
    except InputError as e:
        msg = str(e)
        assert e.path is not None and msg.startswith(e.path), msg      # the file named first
        assert Path(e.path).name.startswith("fuzz."), msg
        assert len(msg) < 2000 + len(e.path) and "Traceback" not in msg
        event("InputError")
        return
    except ElmoError as e:                            # another engine error must name the file
        assert "fuzz." in str(e), str(e)
        event(type(e).__name__)
        return
    finally:
        path.write_bytes(original)
        npz.write_bytes(npz_original)
    _check_loaded(ws)
    event("loaded")


# ---- (b) kills during saves ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = StateForkServer(tmp_path_factory.mktemp("forkserver") / "server.log")
    yield srv
    srv.close()


NPZ = re.compile(r"analysis\.[0-9a-f]{12}\.npz")


def _which_workspace(path: Path, refs: dict) -> int:
    ws = load_workspace(path, verify_checksum=False)        # must load: complete JSON and npz
    for seed, ref in refs.items():
        if ws.data.notes == ref.notes and ws.data.arrays.keys() == ref.arrays.keys() and all(
                np.array_equal(ws.data.arrays[k], ref.arrays[k]) for k in ref.arrays):
            assert ws.data.sentences == ref.sentences and ws.data.views == ref.views
            return seed
    raise AssertionError("the workspace is neither the old nor the new save")


def _ws_strays(folder: Path, path: Path) -> tuple:
    """Hidden temporary files, and npz files the JSON does not name (left by a kill between
    the npz write and the JSON rename, or before the old npz was removed)."""
    named = json.loads(path.read_text())["arrays"]["file"]
    parts, orphans = [], []
    for p in folder.iterdir():
        if p.name in (path.name, named):
            continue
        if re.fullmatch(r"\.[^/]+\.part", p.name):
            parts.append(p)
        else:
            assert NPZ.fullmatch(p.name), f"unexpected file left behind: {p.name}"
            orphans.append(p)
    return parts, orphans


def test_kill_during_workspace_save(server, tmp_path):
    rng = random.Random(909)
    folder = tmp_path / "ws"
    folder.mkdir()
    path = folder / "analysis.elmows.json"
    refs = {seed: workspace_data(seed) for seed in (1, 2)}
    first = server.run("workspace", {"path": str(path), "seed": 1})
    assert first["status"] == 0 and _which_workspace(path, refs) == 1
    current, plan, orphans_seen = 1, faults.KillPlan(rng, first["seconds"]), 0
    for delay in plan:
        other = 3 - current
        result = server.run("workspace", {"path": str(path), "seed": other}, kill_after=delay)
        plan.record(result)
        found = _which_workspace(path, refs)
        parts, orphans = _ws_strays(folder, path)
        orphans_seen += bool(orphans)
        if not result["killed"]:                      # finished: new file, old npz removed
            assert result["status"] == 0 and found == other and not orphans
        current = found
    plan.check()
    parts, orphans = _ws_strays(folder, path)
    print(f"[kill] workspace: {plan.killed} killed, {len(parts)} temp files, "
          f"{orphans_seen} trials left an unnamed npz")
    faults._age(parts)
    assert cleanup_stale_parts(folder) == len(parts)
    assert server.run("workspace", {"path": str(path), "seed": 3 - current})["status"] == 0
    assert _ws_strays(folder, path) == ([], [])       # the next save removes unnamed npz files


def _state(out: Path):
    doc, tensors = state_io.load_state(out)             # must load: complete and consistent
    return doc["step"], tensors


def test_kill_during_training_state_save(server, tmp_path):
    rng = random.Random(515)
    out = tmp_path / "train"
    first = server.run("state", {"out": str(out), "seed": 1})
    assert server.run("state", {"out": str(tmp_path / "ref2"), "seed": 2})["status"] == 0
    assert first["status"] == 0
    refs = {1: _state(out)[1], 2: _state(tmp_path / "ref2")[1]}
    assert refs[1].keys() == refs[2].keys() and any(k.startswith("optim.") for k in refs[1])
    folder = out / state_io.STATE_DIR
    keep = {state_io.STATE_JSON, state_io.STATE_TENSORS}
    current, plan, between = 1, faults.KillPlan(rng, first["seconds"]), 0
    for delay in plan:
        other = 3 - current
        result = server.run("state", {"out": str(out), "seed": other}, kill_after=delay)
        plan.record(result)
        step, tensors = _state(out)
        assert step in refs and tensors.keys() == refs[step].keys()
        for k in tensors:
            assert torch.equal(tensors[k], refs[step][k]), k
        doc = json.loads((folder / state_io.STATE_JSON).read_text())
        between += doc["step"] != step                # killed between the tensors and the JSON
        if not result["killed"]:
            assert result["status"] == 0 and step == other
        current = step
        faults._strays(folder, keep)
    plan.check()
    parts = faults._strays(folder, keep)
    print(f"[kill] training state: {plan.killed} killed, {between} between the two files, "
          f"{len(parts)} temp files left")
    faults._age(folder / n for n in parts)
    assert cleanup_stale_parts(folder) == len(parts)
    assert faults._strays(folder, keep) == []


def _small_state(out: Path, seed: int) -> None:
    torch.manual_seed(seed)
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.Adam(model.parameters())
    model(torch.ones(1, 3)).sum().backward()
    opt.step()
    state_io.save_state(out, model, opt, [(torch.zeros(1, 2), torch.ones(1, 2))],
                        torch.Generator().manual_seed(seed), {"step": seed})


def test_state_killed_between_tensors_and_json_resumes_newer(tmp_path):
    """The window the kill test may miss, made on purpose: new tensors, old state.json."""
    folder = tmp_path / state_io.STATE_DIR
    _small_state(tmp_path, 1)
    old_json = (folder / state_io.STATE_JSON).read_bytes()
    _small_state(tmp_path, 2)
    new_tensors = state_io.load_state(tmp_path)[1]
    (folder / state_io.STATE_JSON).write_bytes(old_json)
    doc, tensors = state_io.load_state(tmp_path)
    assert doc["step"] == 2 and doc["format"] == state_io.STATE_FORMAT
    assert tensors.keys() == new_tensors.keys()
    assert all(torch.equal(tensors[k], new_tensors[k]) for k in tensors)
    assert sorted(p.name for p in folder.iterdir()) == [state_io.STATE_JSON,
                                                        state_io.STATE_TENSORS]


def test_state_foreign_tensors_still_refused(tmp_path):
    from safetensors.torch import save_file

    _small_state(tmp_path, 1)
    weights = tmp_path / state_io.STATE_DIR / state_io.STATE_TENSORS
    save_file({"x": torch.zeros(2)}, str(weights))        # no state document inside
    with pytest.raises(CheckpointError, match="do not match state.json") as err:
        state_io.load_state(tmp_path)
    assert str(weights) in str(err.value)
    shutil.rmtree(tmp_path / state_io.STATE_DIR)
