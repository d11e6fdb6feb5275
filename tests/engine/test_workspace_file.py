"""The workspace file: round trip, validation messages, moved checkpoint, checksum, recovery."""
from __future__ import annotations

import errno
import json
import os
import shutil
import time

import numpy as np
import pytest

from elmo_engine.errors import ElmoError, InputError
from elmo_engine.io import recovery
from elmo_engine.io.recovery import autosave_path, discard_autosave, find_recovery
from elmo_engine.io.workspace_file import (AUTOSAVE_NAME, FORMAT, CheckpointRef, WorkspaceData,
                                           checkpoint_checksum, load_workspace, save_workspace)
from elmo_engine.model.checkpoint import file_checksum, resolve_checkpoint


def sample(checkpoint=None, checksum="") -> WorkspaceData:
    return WorkspaceData(
        sentences=["He sat on the bank.", "The bank rose — ünïcode ✓"],
        checkpoint=None if checkpoint is None else CheckpointRef(str(checkpoint), checksum, "tiny"),
        selection={"sentence": 1, "token": 1, "word": "bank"},
        views={"contexts": {"word": "bank", "weights": [0.2, 0.3, 0.5], "direction": "forward"},
               "projection": {"layers": [0, 2], "umap": {"n_neighbors": 15, "min_dist": 0.1}}},
        probe_runs=[{"task": "pos", "mix": {"weights": [0.1, 0.6, 0.3], "gamma": 1.2}}],
        arrays={"coords": np.arange(12, dtype=np.float32).reshape(6, 2)},
        notes="first look")


def test_round_trip_equal(tmp_path):
    path = tmp_path / "a.elmows.json"
    data = sample()
    save_workspace(path, data)
    loaded = load_workspace(path)
    got = loaded.data
    assert got.sentences == data.sentences and got.selection == data.selection
    assert got.views == data.views and got.probe_runs == data.probe_runs and got.notes == "first look"
    np.testing.assert_array_equal(got.arrays["coords"], data.arrays["coords"])
    assert got.arrays["coords"].dtype == np.float32
    obj = json.loads(path.read_text(encoding="utf-8"))
    assert obj["format"] == FORMAT and obj["version"] == 1
    npz = tmp_path / obj["arrays"]["file"]
    assert npz.is_file() and obj["arrays"]["keys"]["coords"] == {"shape": [6, 2], "dtype": "float32"}
    assert not loaded.checkpoint_missing and not loaded.checksum_mismatch
    # saving new arrays replaces the old npz; no stale files, no temporaries
    data.arrays = {"coords": np.zeros((2, 2), np.float32)}
    save_workspace(path, data)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["a.elmows.json", json.loads(path.read_text())["arrays"]["file"]])
    assert load_workspace(path).data.arrays["coords"].shape == (2, 2)


def test_numpy_values_and_nan_become_json(tmp_path):
    data = WorkspaceData(sentences=["x"], views={"p": {"w": np.array([0.5, np.nan]),
                                                      "k": np.int64(3), "t": (1, 2)}})
    save_workspace(tmp_path / "w.json", data)
    assert load_workspace(tmp_path / "w.json").data.views == {"p": {"w": [0.5, None], "k": 3,
                                                                    "t": [1, 2]}}
    with pytest.raises(InputError, match="views.p.bad"):
        save_workspace(tmp_path / "bad.json", WorkspaceData(views={"p": {"bad": {1, 2}}}))
    assert not (tmp_path / "bad.json").exists()


@pytest.mark.parametrize("edit,message", [
    (lambda o: o.update(version=2), "key 'version' is 2: this workspace was written by a newer"),
    (lambda o: o.pop("sentences"), "key 'sentences' is missing"),
    (lambda o: o.update(sentences="abc"), "key 'sentences' must be a list, found a string"),
    (lambda o: o["sentences"].append(5), "key 'sentences[2]' must be a string, found a number"),
    (lambda o: o.update(views=[]), "key 'views' must be an object, found a list"),
    (lambda o: o["views"].update(contexts=3), "key 'views.contexts' must be an object"),
    (lambda o: o["selection"].update(token="1"), "key 'selection.token' must be an integer"),
    (lambda o: o["selection"].update(sentence=9), "names token 1 of sentence 9"),
    (lambda o: o["checkpoint"].pop("path"), "key 'checkpoint.path' is missing"),
    (lambda o: o.update(format="something"), "not an ELMo Explorer workspace"),
    (lambda o: o.update(probe_runs=[1]), "key 'probe_runs[0]' must be an object"),
    (lambda o: o.update(tokenization="spaces"),
     "key 'tokenization' must be one of tokenize, whitespace, found 'spaces'"),
    (lambda o: o.update(tokenization=1), "key 'tokenization' must be a string"),
])
def test_validation_names_file_and_key(tmp_path, edit, message):
    path = tmp_path / "w.elmows.json"
    save_workspace(path, sample(checkpoint=tmp_path))
    obj = json.loads(path.read_text(encoding="utf-8"))
    edit(obj)
    path.write_text(json.dumps(obj), encoding="utf-8")
    with pytest.raises(InputError) as err:
        load_workspace(path)
    assert str(err.value).startswith(str(path) + ": ") and message in str(err.value)


def test_not_json_and_missing_arrays(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "elmo-explorer-workspace",\n "version": 1,,}', encoding="utf-8")
    with pytest.raises(InputError, match=r"bad.json:2: not a valid JSON"):
        load_workspace(bad)
    path = tmp_path / "w.elmows.json"
    save_workspace(path, sample())
    for f in tmp_path.glob("w.*.npz"):
        f.unlink()
    with pytest.raises(InputError, match="arrays file .* is missing"):
        load_workspace(path)


def test_moved_checkpoint_and_checksum_mismatch(tmp_path, tiny_checkpoint):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(tiny_checkpoint, ckpt)
    _fmt, opts, weights = resolve_checkpoint(ckpt)
    good = file_checksum(opts, weights)
    assert checkpoint_checksum(ckpt) == good
    path = tmp_path / "w.elmows.json"
    save_workspace(path, sample(ckpt, good))
    ok = load_workspace(path)
    assert ok.checkpoint_path == str(ckpt) and not ok.checkpoint_missing and not ok.checksum_mismatch
    with open(weights, "ab") as fh:                       # the same path, other content
        fh.write(b"\0")
    changed = load_workspace(path)
    assert changed.checksum_mismatch and not changed.checkpoint_missing
    assert not load_workspace(path, verify_checksum=False).checksum_mismatch
    ckpt.rename(tmp_path / "elsewhere")
    moved = load_workspace(path)
    assert moved.checkpoint_missing and moved.checkpoint_path is None
    assert moved.data.checkpoint.path == str(ckpt)


def test_relative_checkpoint_found_beside_workspace(tmp_path, tiny_checkpoint, monkeypatch):
    project = tmp_path / "project"
    shutil.copytree(tiny_checkpoint, project / "model")
    save_workspace(project / "w.json", sample("model", checkpoint_checksum(project / "model")))
    monkeypatch.chdir(tmp_path)                           # "model" is not in the cwd
    loaded = load_workspace(project / "w.json")
    assert loaded.checkpoint_path == str(project / "model") and not loaded.checksum_mismatch


def test_disk_full_keeps_previous_file(tmp_path, monkeypatch):
    path = tmp_path / "w.elmows.json"
    save_workspace(path, sample())
    before = sorted(p.name for p in tmp_path.iterdir())
    old_text = path.read_text(encoding="utf-8")

    def full(_fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    data = sample()
    data.arrays = {"other": np.ones(3)}
    with pytest.raises(ElmoError) as err:
        save_workspace(path, data)
    assert str(path.parent) in str(err.value) and "No space left" in str(err.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert path.read_text(encoding="utf-8") == old_text


def _autosave_of(folder, pid, sentences, source="", host=None):
    """An autosave as the window of process ``pid`` writes it."""
    path = autosave_path(folder, pid)
    data = WorkspaceData(sentences=list(sentences), source=source)
    save_workspace(path, data)
    obj = json.loads(path.read_text())
    obj["session"] = {"pid": pid, "host": recovery._host() if host is None else host}
    path.write_text(json.dumps(obj))
    return path


def test_recovery_detection(tmp_path):
    folder = tmp_path / "data"
    assert find_recovery(folder) is None
    saved = tmp_path / "mine.elmows.json"
    crashed = 2 ** 22 + 12345                             # a crashed session: no such process
    auto = _autosave_of(folder, crashed, ["a b", "c d"], source=str(saved))
    assert auto.name == f"autosave-{crashed}.elmows.json"
    rec = find_recovery(folder)
    assert rec is not None and rec.path == auto and rec.n_sentences == 2
    assert rec.source == str(saved)
    save_workspace(saved, sample())                       # an explicit save after the autosave
    later = time.time() + 5
    os.utime(saved, (later, later))
    assert find_recovery(folder) is None
    assert not auto.exists()                              # the workspace holds that work
    auto = _autosave_of(folder, crashed, ["a b", "c d"], source=str(saved))
    os.utime(saved, (later - 100, later - 100))           # the autosave is newer
    assert find_recovery(folder) is not None
    auto.unlink()
    auto = _autosave_of(folder, os.getppid(), ["a b"], host="another-host")
    assert find_recovery(folder) is not None              # a pid of another host is not ours
    auto.unlink()
    running = _autosave_of(folder, os.getppid(), ["a b"])  # a session still running here
    assert find_recovery(folder) is None
    discard_autosave(folder)                              # this window's clean exit
    assert running.exists()                               # another window's file stays
    recovery.discard(running)
    assert not running.exists() and not list(folder.glob("*.npz"))
    assert find_recovery(folder) is None


def test_two_windows_keep_their_own_autosaves_and_the_crashed_one_is_offered(tmp_path):
    """Two windows on one settings folder shared one autosave: each wrote over the other's
    work, and the first to quit cleanly removed the file a crash of the other needed. Two live
    processes stand for the two windows; the one killed is the crash."""
    import subprocess
    import sys

    folder = tmp_path / "autosave"
    procs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
             for _ in range(2)]
    try:
        a = _autosave_of(folder, procs[0].pid, ["window a"])
        b = _autosave_of(folder, procs[1].pid, ["window b", "two"])
        assert a != b
        assert find_recovery(folder) is None                # both windows are running
        procs[0].kill()
        procs[0].wait()
        rec = find_recovery(folder)
        assert rec is not None and rec.path == a and rec.n_sentences == 1
        recovery.discard(a)                                 # a third window took it over
        assert find_recovery(folder) is None and b.exists()
        procs[1].kill()
        procs[1].wait()
        rec = find_recovery(folder)
        assert rec is not None and rec.path == b and rec.n_sentences == 2
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def test_a_claimed_autosave_is_one_windows_and_a_stale_claim_is_taken_over(tmp_path):
    """Two windows starting together both offered one crashed autosave, and one declining
    deleted what the other recovered: a window claims it first (O_EXCL)."""
    import subprocess
    import sys

    folder = tmp_path / "autosave"
    crashed = _autosave_of(folder, 2 ** 22 + 5, ["crashed"])
    lock = crashed.with_name(crashed.name + recovery.CLAIM_SUFFIX)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        lock.write_text(f"{other.pid} {recovery._host()}\n")     # another window holds it
        assert not recovery.claim(crashed) and find_recovery(folder) is None
        recovery.release(crashed)                                 # not ours: left alone
        assert lock.exists()
        other.kill()
        other.wait()
        assert find_recovery(folder).path == crashed              # its claim is stale now
        assert recovery.claim(crashed) and lock.read_text().split()[0] == str(os.getpid())
        assert recovery.claim(crashed)                            # held: held again
        recovery.release(crashed)
        assert not lock.exists() and crashed.exists()
        lock.write_text("garbage")                                # no claim at all
        assert recovery.claim(crashed)
        recovery.discard(crashed)
        assert not crashed.exists() and not lock.exists()
    finally:
        other.kill()
        other.wait()


def test_a_running_windows_unreadable_autosave_is_left_where_it_is(tmp_path):
    """A newer version's window, running: its autosave cannot be read here, and was kept aside
    at every start of this version."""
    import subprocess
    import sys

    folder = tmp_path / "autosave"
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        theirs = _autosave_of(folder, other.pid, ["newer"])
        obj = json.loads(theirs.read_text())
        obj["version"] = 99
        theirs.write_text(json.dumps(obj))
        assert find_recovery(folder) is None
        assert theirs.exists() and not [p for p in folder.iterdir() if ".unreadable-" in p.name]
        other.kill()
        other.wait()
        assert find_recovery(folder) is None                      # now kept aside
        assert not theirs.exists() and [p for p in folder.iterdir() if ".unreadable-" in p.name]
    finally:
        other.kill()
        other.wait()


def test_the_newest_autosave_is_offered_first_and_the_old_single_file_is_found(tmp_path):
    folder = tmp_path / "autosave"
    old = folder / AUTOSAVE_NAME                          # the one file of older versions
    save_workspace(old, WorkspaceData(sentences=["old one"]))
    obj = json.loads(old.read_text())
    obj["session"] = {"pid": 2 ** 22 + 1, "host": recovery._host()}
    old.write_text(json.dumps(obj))
    newer = _autosave_of(folder, 2 ** 22 + 2, ["newer", "two"])
    os.utime(old, (time.time() - 60, time.time() - 60))
    assert find_recovery(folder).path == newer
    recovery.discard(newer)
    assert find_recovery(folder).path == old
    for n in range(recovery.MAX_AUTOSAVES + 6):            # a folder of many: read in part
        (folder / f"autosave-{n + 1}.elmows.json").write_text("{}")
    assert len(recovery.autosave_files(folder)) == recovery.MAX_AUTOSAVES
    (folder / "autosave-x.elmows.json").write_text("{}")   # not an autosave name
    (folder / "notes.elmows.json").write_text("{}")
    assert all(p.name.startswith("autosave-") and p.name[9:-12].isdigit() or p == old
               for p in recovery.autosave_files(folder))


def test_the_tokenization_is_saved_and_a_file_without_it_is_typed_text(tmp_path):
    """Settings ▸ Tokenization goes with the sentences: "whitespace" (pretokenized) comes back;
    a workspace written before the key is typed text, as it was then."""
    from elmo_engine.analysis.report import tokenize_sentences
    from elmo_engine.model.tokenize import sentence_tokens

    path = tmp_path / "w.elmows.json"
    data = sample()
    data.sentences = ["The well @-@ known bank\u200b .", "A bank ."]
    data.tokenization = "whitespace"
    save_workspace(path, data)
    got = load_workspace(path).data
    assert got.tokenization == "whitespace"
    assert tokenize_sentences(got.sentences, got.tokenization)[0] == ["The", "well", "@-@",
                                                                     "known", "bank", "."]
    assert sentence_tokens("The well @-@ known bank .") == ["The", "well", "@", "-", "@",
                                                             "known", "bank", "."]
    obj = json.loads(path.read_text(encoding="utf-8"))
    del obj["tokenization"]
    path.write_text(json.dumps(obj), encoding="utf-8")
    assert load_workspace(path).data.tokenization == "tokenize"
    with pytest.raises(ValueError, match="tokenization must be one of"):
        sentence_tokens("a b", "spaces")
