"""Resource limits: sentences that are too long, a GPU that runs out of memory, a full disk."""
from __future__ import annotations

import errno
import resource
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from elmo_engine import cli
from elmo_engine.io.embeddings_file import EmbeddingsWriter
from elmo_engine.atomic import WriteError, atomic_hdf5, atomic_path, atomic_write_text
from elmo_engine.model.checkpoint import load_checkpoint
from elmo_engine.embed.embedder import MAX_SENTENCE_TOKENS, Embedder
from elmo_engine.errors import ElmoError, InputError

from support import FIXTURES, REPO

SENTS = [["The", "bank", "was", "closed", "."], ["Rivers", "flow"], ["a"] * 9,
         ["She", "sat", "on", "the", "river", "bank", "."], ["x"], ["b%d" % i for i in range(14)]]


@pytest.fixture(scope="module")
def model():
    return load_checkpoint(FIXTURES / "allennlp")


def _oom(msg="CUDA out of memory. Tried to allocate 2.00 GiB"):
    return torch.cuda.OutOfMemoryError(msg)


# ---- sentence length ---------------------------------------------------------------------------
def test_sentence_over_the_limit_is_an_input_error(model):
    emb = Embedder(model)
    with pytest.raises(InputError) as e:
        emb.embed([["ok"], ["w"] * (MAX_SENTENCE_TOKENS + 1)])
    msg = str(e.value)
    assert "sentence 1" in msg and str(MAX_SENTENCE_TOKENS) in msg and "split" in msg
    with pytest.raises(InputError, match="limit"):
        emb.embed_stateful([["w"] * (MAX_SENTENCE_TOKENS + 1)])
    out = emb.embed([["w"] * 3])                   # the embedder is still usable afterwards
    assert out[0].shape == (3, 3, 32)


def test_cli_refuses_an_over_long_line(tmp_path, capsys):
    inp = tmp_path / "in.txt"
    inp.write_text("short line\n" + " ".join(["w"] * (MAX_SENTENCE_TOKENS + 1)) + "\n")
    out = tmp_path / "out.hdf5"
    assert cli.main(["embed", str(inp), "-o", str(out), "--checkpoint", str(FIXTURES / "allennlp")]) == 1
    err = capsys.readouterr().err
    assert "error" in err and "limit" in err and "Traceback" not in err
    assert not out.exists() and not list(tmp_path.glob(".*part"))


# ---- GPU out of memory (simulated on the CPU) ----------------------------------------------------
def _flaky(model, monkeypatch, fail_above: int, fail_singles: int = 0):
    """Make ``model.contextual`` raise CUDA OOM for batches of more than ``fail_above`` rows,
    and for the first ``fail_singles`` single-row batches."""
    real = model.contextual
    seen = {"rows": [], "singles": 0}

    def contextual(tok, lengths, init=None, **kw):
        rows = tok.shape[0]
        seen["rows"].append(rows)
        if rows > fail_above:
            raise _oom()
        if rows == 1 and seen["singles"] < fail_singles:
            seen["singles"] += 1
            raise _oom()
        return real(tok, lengths, init, **kw)

    monkeypatch.setattr(model, "contextual", contextual)
    return seen


def test_oom_retries_in_smaller_batches_with_the_same_results(model, monkeypatch):
    expected = Embedder(model).embed(SENTS)
    warnings = []
    seen = _flaky(model, monkeypatch, fail_above=2)
    got = Embedder(model, on_warning=warnings.append).embed(SENTS)
    for a, b in zip(expected, got):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)
    assert max(seen["rows"]) == len(SENTS) and max(r for r in seen["rows"] if r <= 2) == 2
    assert warnings and all("out of memory" in w and "smaller batches" in w for w in warnings)


def test_oom_on_one_sentence_falls_back_to_the_cpu_and_says_so(model, monkeypatch):
    expected = Embedder(model).embed(SENTS)
    warnings = []
    _flaky(model, monkeypatch, fail_above=1, fail_singles=1)
    emb = Embedder(model, on_warning=warnings.append)
    got = emb.embed(SENTS)
    for a, b in zip(expected, got):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)
    assert any("smaller batches" in w for w in warnings)
    assert any("falling back to the CPU" in w for w in warnings)
    assert emb.device.type == "cpu"


def test_oom_even_on_the_cpu_is_a_clear_error_not_a_recursion(model, monkeypatch):
    warnings = []
    _flaky(model, monkeypatch, fail_above=0)
    emb = Embedder(model, on_warning=warnings.append)
    with pytest.raises(InputError, match="out of memory on a sentence of 5 tokens even on the CPU"):
        emb.embed([SENTS[0]])
    assert len(warnings) == 1 and "falling back to the CPU" in warnings[0]


def test_stateful_oom_splits_rows_keeps_each_rows_state_and_falls_back(model, monkeypatch):
    """Row r keeps state slot r through the split and the move to the CPU: the second call
    (which starts from the state the first one left) still matches a normal run."""
    ref = Embedder(model)
    expected = [ref.embed_stateful(SENTS, batch_size=4), ref.embed_stateful(SENTS[::-1], batch_size=4)]
    warnings = []
    _flaky(model, monkeypatch, fail_above=1, fail_singles=1)
    emb = Embedder(model, on_warning=warnings.append)
    got = [emb.embed_stateful(SENTS, batch_size=4), emb.embed_stateful(SENTS[::-1], batch_size=4)]
    for exp_call, got_call in zip(expected, got):
        assert len(exp_call) == len(got_call) == len(SENTS)
        for a, b in zip(exp_call, got_call):
            # 2e-6, not 1e-6: split batches change the GEMM shapes, and the float32 rounding
            # of the LSTM step (tanh as 2σ(2x)−1) is carried through the state of two calls
            np.testing.assert_allclose(a, b, rtol=0, atol=2e-6)
    assert any("smaller batches" in w for w in warnings)
    assert sum("falling back to the CPU" in w for w in warnings) == 1


def test_stateful_oom_even_on_the_cpu_is_a_clear_error(model, monkeypatch):
    _flaky(model, monkeypatch, fail_above=0)
    with pytest.raises(InputError, match="even on the CPU"):
        Embedder(model).embed_stateful(SENTS, batch_size=4)


# ---- disk full -----------------------------------------------------------------------------------
def _enospc(*_a, **_k):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_atomic_write_on_a_full_disk(tmp_path, monkeypatch):
    target = tmp_path / "notes.json"
    atomic_write_text(target, "old")
    with pytest.raises(WriteError) as e:
        with atomic_path(target) as tmp:
            tmp.write_bytes(b"partial")
            _enospc()
    assert isinstance(e.value, OSError) and isinstance(e.value, ElmoError)
    assert e.value.errno == errno.ENOSPC and "No space left on device" in str(e.value)
    assert str(target) in str(e.value) and "unchanged" in str(e.value)
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.json"]
    with pytest.raises(ValueError):                # other errors pass through unchanged
        with atomic_path(target):
            raise ValueError("x")


def test_a_folder_that_takes_no_new_file_names_the_target_not_the_temporary(tmp_path,
                                                                            monkeypatch, capsys):
    """A fourth attack pass: ``-o ro/out.json`` on a read-only mount said "Read-only file
    system (ro/.out.json.uik26zr1.json.part)": the temporary file's name, never the user's."""
    import tempfile

    def read_only(prefix="", suffix="", dir=None):
        name = f"{dir}/{prefix}abc123{suffix}"
        raise OSError(errno.EROFS, "Read-only file system", name)

    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    target = tmp_path / "out.json"
    with pytest.raises(OSError) as e:
        atomic_write_text(target, "{}")
    assert e.value.filename == str(target) and e.value.errno == errno.EROFS
    sentences = tmp_path / "s.txt"
    sentences.write_text("The bank .\n", encoding="utf-8")
    code = cli.main(["units", "top", str(sentences), "--unit", "3", "--checkpoint",
                     str(FIXTURES / "allennlp"), "-o", str(target)])
    err = capsys.readouterr().err
    assert code == 1 and str(target) in err and ".part" not in err and "abc123" not in err
    assert not list(tmp_path.glob(".out.json*"))


def test_an_output_folder_that_takes_no_files_is_refused_before_the_work(tmp_path, monkeypatch,
                                                                         capsys):
    """``layers -o ro/l.json`` on a read-only folder ran the whole analysis, then failed. The
    folder an output goes in is checked with the other output checks (access(2): a read-only
    file system refuses root too)."""
    import os

    ro = tmp_path / "ro"
    ro.mkdir()
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: (
        False if os.path.realpath(p) == str(ro.resolve()) else real_access(p, mode, **kw)))
    sentences = tmp_path / "s.txt"
    sentences.write_text("The bank was closed .\nShe sat on the river bank .\n", encoding="utf-8")
    for argv in (["layers", str(sentences), "-o", str(ro / "l.json"), "--json"],
                 ["embed", str(sentences), "-o", str(ro / "deeper" / "v.hdf5")]):
        code = cli.main(argv + ["--checkpoint", str(FIXTURES / "allennlp")])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 1 and len(err) == 1 and f"{ro} takes no new files" in err[0], err
    assert list(ro.iterdir()) == []
    # a folder output written in place (an index resumed, a training resumed) is checked
    # itself: a writable folder inside a read-only one is not refused (a review found it was)
    from elmo_engine.cli.common import check_writable_folder

    monkeypatch.setattr(os, "access", real_access)
    mine = ro / "mine"
    mine.mkdir()
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: (
        False if os.path.realpath(p) == str(ro.resolve()) else real_access(p, mode, **kw)))
    check_writable_folder(mine)                                  # itself writable: fine
    with pytest.raises(InputError, match="takes no new files"):
        check_writable_folder(ro / "new-folder")                 # made in ro: refused


def test_a_folder_that_access_calls_writable_but_takes_no_file_is_refused_before_the_work(
        tmp_path, monkeypatch, capsys):
    """access(2) says yes to root in ``/sys`` and on an NFS export that maps root to nobody;
    the write failed after the work. A file made and removed decides (``_takes_new_files``);
    nothing is left in a folder that takes files."""
    import errno
    import os
    import tempfile

    from elmo_engine.cli.common import check_writable_folder

    ro = tmp_path / "nfs"
    ro.mkdir()
    real_mkstemp = tempfile.mkstemp

    def refusing(*a, dir=None, **kw):
        if dir is not None and Path(dir).resolve() == ro.resolve():
            raise OSError(errno.EACCES, "Permission denied")
        return real_mkstemp(*a, dir=dir, **kw)

    monkeypatch.setattr(tempfile, "mkstemp", refusing)
    assert os.access(ro, os.W_OK | os.X_OK)
    sentences = tmp_path / "s.txt"
    sentences.write_text("The bank was closed .\n", encoding="utf-8")
    code = cli.main(["embed", str(sentences), "-o", str(ro / "v.hdf5"),
                     "--checkpoint", str(FIXTURES / "allennlp")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1 and f"{ro} takes no new files" in err[0], err
    check_writable_folder(tmp_path / "v.hdf5")                 # a folder that takes files
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nfs", "s.txt"]
    if os.path.isdir("/sys") and os.access("/sys", os.W_OK) and not _can_create_in("/sys"):
        with pytest.raises(InputError, match="takes no new files"):
            check_writable_folder(Path("/sys/v.hdf5"))           # a real one, where there is


def _can_create_in(folder) -> bool:
    import tempfile

    try:
        with tempfile.TemporaryFile(dir=folder):
            return True
    except OSError:
        return False


def test_atomic_hdf5_survives_a_real_write_failure(tmp_path):
    """HDF5 keeps writing (400 datasets) after the kernel refused a write: no crash, no h5py
    traceback (pytest turns those into errors), one WriteError at the end, nothing left."""
    target = tmp_path / "big.hdf5"
    with atomic_hdf5(target) as fh:
        fh["x"] = np.arange(10, dtype=np.float32)
    before = target.read_bytes()
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, hard))
    try:
        with pytest.raises(WriteError, match="File too large") as e:
            with atomic_hdf5(target) as fh:
                for i in range(400):
                    fh.create_dataset(str(i), data=np.full((3, 10, 32), i, np.float32))
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, old_handler)
    assert e.value.errno == errno.EFBIG
    assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.hdf5"]
    with pytest.raises(KeyError):                   # other errors pass through unchanged
        with atomic_hdf5(target) as fh:
            fh["y"] = np.zeros(3, np.float32)
            raise KeyError("stop")
    assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.hdf5"]


@pytest.fixture()
def sentence_file(tmp_path):
    inp = tmp_path / "in.txt"
    inp.write_text("\n".join(" ".join(f"w{(i * 7 + j) % 97}" for j in range(10)) for i in range(400))
                   + "\n")
    return inp


def test_embed_output_on_a_full_disk_leaves_nothing(tmp_path, sentence_file, capsys, monkeypatch):
    out = tmp_path / "out.hdf5"
    real_add = EmbeddingsWriter.add
    calls = [0]

    def add(self, key, arr):
        calls[0] += 1
        if calls[0] == 250:
            _enospc()
        real_add(self, key, arr)

    monkeypatch.setattr(EmbeddingsWriter, "add", add)
    code = cli.main(["embed", str(sentence_file), "-o", str(out), "--checkpoint",
                     str(FIXTURES / "allennlp")])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "No space left on device" in err and str(out) in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]


def _limit_file_size(limit: int):
    """For a child process: the kernel refuses writes past ``limit`` bytes (EFBIG)."""
    def pre():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
    return pre


def test_embed_hits_a_real_file_size_limit(tmp_path, sentence_file):
    """A real failure inside the HDF5 library: RLIMIT_FSIZE makes the kernel refuse writes past
    1 MB (EFBIG) while the ~1.5 MB output is written; an existing output stays intact."""
    out = tmp_path / "out.hdf5"
    ckpt = str(FIXTURES / "allennlp")
    assert cli.main(["embed", str(sentence_file), "-o", str(out), "--checkpoint", ckpt,
                     "--layers", "top"]) == 0
    before = out.read_bytes()
    assert len(before) < 900_000
    run = subprocess.run([sys.executable, "-m", "elmo_explorer.entry", "embed", str(sentence_file),
                          "-o", str(out), "--checkpoint", ckpt, "--force"], cwd=REPO, capture_output=True,
                         text=True, preexec_fn=_limit_file_size(1 << 20), timeout=300)
    assert run.returncode == 1, run.stderr[-2000:]
    assert "File too large" in run.stderr and str(out) in run.stderr
    assert "Traceback" not in run.stderr and "Exception ignored" not in run.stderr
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "out.hdf5"]


def test_save_published_hits_a_real_file_size_limit(model, tmp_path):
    """The weights (~450 kB) cannot be written past 200 kB: a WriteError, the earlier checkpoint
    intact, no temporary file — and no crash inside HDF5 (atomic_hdf5)."""
    from elmo_engine.model.checkpoint import save_published

    folder = tmp_path / "ckpt"
    save_published(model, folder)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, hard))
    try:
        with pytest.raises(WriteError) as e:
            save_published(model, folder)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, old_handler)
    assert e.value.errno == errno.EFBIG and "lm_weights.hdf5" in str(e.value)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    again = load_checkpoint(folder)
    for a, b in zip(again.parameters(), model.parameters()):
        assert torch.equal(a, b)


def test_cache_write_on_a_full_disk_keeps_working_in_memory(model, tmp_path, monkeypatch):
    expected = Embedder(model).embed(SENTS)
    cache = tmp_path / "cache"
    real_save = np.save

    def save(fh, arr, *a, **k):
        fh.write(b"\x93NUMPY half an entry")       # a partial write, then the disk is full
        _enospc()

    monkeypatch.setattr(np, "save", save)
    warnings = []
    emb = Embedder(model, cache_dir=cache, on_warning=warnings.append)
    got = emb.embed(SENTS)
    for a, b in zip(expected, got):
        np.testing.assert_array_equal(a, b)
    assert len(warnings) == 1
    assert "could not write the activation cache" in warnings[0]
    assert "No space left on device" in warnings[0]
    assert not [p for p in cache.rglob("*") if p.is_file()]    # no entry, no temp file
    misses = emb.stats["sentence_misses"]
    again = emb.embed(SENTS)                                    # served from memory
    assert emb.stats["sentence_misses"] == misses
    assert all(a is b for a, b in zip(got, again))

    monkeypatch.setattr(np, "save", real_save)                  # space again: the cache recovers
    fresh = Embedder(model, cache_dir=cache)
    fresh.embed(SENTS)
    assert len(list(cache.rglob("*.npy"))) == len(SENTS)
    reread = Embedder(model, cache_dir=cache)
    for a, b in zip(expected, reread.embed(SENTS)):
        np.testing.assert_array_equal(a, b)
    assert reread.stats["sentence_misses"] == 0
