"""Issue 18 ("hardening, round two"): each reported case as a regression test.

Small hostile files built here: HDF5 weights with a chunk larger than its dataset or a
decompression bomb inside a chunk, an external link to a non-HDF5 file, 4,000 nested groups, a
huge ``max_characters_per_token``; a workspace npz whose ``.npy`` header lies about its shape
and one compressed implausibly well; probe runs with a layer index of 99, a string where a
number belongs, a list where an object belongs; views nested 900 deep; ``embed`` reading
``/dev/zero``, a FIFO, its own output; BOM, NUL and zero-width characters; a folder as output; an
output's mode; a MemoryError anywhere. Every CLI case must end with status 0–2 and one line on
stderr, never a traceback, and leave its inputs as they were.
"""
from __future__ import annotations

import copy
import io
import json
import os
import resource
import stat
import zipfile
import zlib
from pathlib import Path

import h5py
import numpy as np
import pytest

from elmo_engine.cli.main import main
from elmo_engine.errors import CheckpointError, InputError
from elmo_engine.model.checkpoint import load_checkpoint
from elmo_engine.model.options import MAX_CHARACTERS_PER_TOKEN

from support import FIXTURES
from hardening_helpers import ckpt

SOURCE = FIXTURES / "allennlp"
MB = 1 << 20


def _peak_kb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def cli(argv, capsys):
    """Run the CLI in-process: (status, stderr). One line on stderr, no traceback."""
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert code in (0, 1, 2), (code, err)
    assert "Traceback" not in err, err
    if code:
        assert err.strip() and "\n" not in err.strip(), err
    return code, err


def _zeros_deflated(nbytes: int) -> bytes:
    c = zlib.compressobj(9)
    block = bytes(MB)
    out = [c.compress(block) for _ in range(nbytes // MB)]
    return b"".join(out) + c.flush()


# ---- weights HDF5 -----------------------------------------------------------------------------
def test_chunk_larger_than_its_dataset_is_refused_before_reading(tmp_path, capsys):
    d = ckpt(tmp_path)
    big = 1 << 26                                   # elements in the one chunk (256 MB of float32)
    with h5py.File(d / "lm_weights.hdf5", "r+") as fh:
        del fh["CNN/b_cnn_0"]
        ds = fh.create_dataset("CNN/b_cnn_0", shape=(4,), maxshape=(None,), chunks=(big,),
                               dtype="f4", compression="gzip")
        ds.id.write_direct_chunk((0,), _zeros_deflated(big * 4))
    before = _peak_kb()
    code, err = cli(["info", "--checkpoint", d], capsys)
    assert code == 1 and "chunks larger than the dataset" in err and "CNN/b_cnn_0" in err
    assert _peak_kb() - before < 100_000              # nothing near the chunk's size allocated


def test_deflate_bomb_inside_a_chunk_is_refused(tmp_path):
    d = ckpt(tmp_path)
    with h5py.File(d / "lm_weights.hdf5", "r+") as fh:
        del fh["CNN/W_cnn_4"]
        shape = (1, 5, 4, 64)                        # a 5 kB chunk; 4 MB inside its ~4 kB
        ds = fh.create_dataset("CNN/W_cnn_4", shape=shape, chunks=shape, dtype="f4",
                               compression="gzip")
        ds.id.write_direct_chunk((0, 0, 0, 0), _zeros_deflated(4 * MB))
    before = _peak_kb()
    with pytest.raises(CheckpointError, match="expands beyond its chunk"):
        load_checkpoint(d)
    assert _peak_kb() - before < 50_000


def test_gzip_weights_still_load(tmp_path):
    d = ckpt(tmp_path)
    src = load_checkpoint(SOURCE)
    with h5py.File(d / "lm_weights.hdf5", "r+") as fh:
        for name in ("CNN/W_cnn_4", "char_embed"):
            data = fh[name][()]
            del fh[name]
            fh.create_dataset(name, data=data, compression="gzip", shuffle=True, fletcher32=True)
    model = load_checkpoint(d)
    for a, b in zip(model.parameters(), src.parameters()):
        assert np.array_equal(a.numpy(), b.numpy())


def test_external_link_to_a_non_hdf5_file_is_named(tmp_path, capsys):
    d = ckpt(tmp_path)
    (d / "notes.txt").write_text("not hdf5\n")
    with h5py.File(d / "lm_weights.hdf5", "r+") as fh:
        del fh["char_embed"]
        fh["char_embed"] = h5py.ExternalLink("notes.txt", "/char_embed")
    code, err = cli(["info", "--checkpoint", d], capsys)
    assert code == 1 and "external link to 'notes.txt'" in err and "missing dataset" not in err


def test_thousands_of_nested_groups_end_at_a_depth_limit(tmp_path, capsys):
    d = ckpt(tmp_path)
    with h5py.File(d / "lm_weights.hdf5", "r+") as fh:
        g = fh.create_group("deep")
        for _ in range(4000):
            g = g.create_group("g")
    code, err = cli(["info", "--checkpoint", d], capsys)
    assert code == 1 and "nests groups implausibly deep" in err


def test_a_few_extra_empty_groups_still_load(tmp_path):
    d = ckpt(tmp_path)
    with h5py.File(d / "lm_weights.hdf5", "r+") as fh:
        g = fh.create_group("notes")
        for _ in range(10):
            g = g.create_group("g")
    assert load_checkpoint(d).parameter_counts()["total"] > 0


def test_the_extra_name_walk_visits_each_group_once(tmp_path, monkeypatch):
    """Linear walk: every group's keys listed exactly once, however wide the tree."""
    from elmo_engine.model import hdf5_checks

    d = ckpt(tmp_path)
    with h5py.File(d / "lm_weights.hdf5", "r+") as fh:
        for i in range(300):
            fh.create_group(f"extra{i}").create_group("inner")
        n_groups = []
        fh.visititems(lambda n, o: n_groups.append(n) if isinstance(o, h5py.Group) else None)
    listed = []
    real_keys = h5py.Group.keys
    monkeypatch.setattr(h5py.Group, "keys", lambda self: listed.append(1) or real_keys(self))
    load_checkpoint(d)
    assert len(listed) >= len(n_groups) + 1                # the root and every group
    assert len(listed) <= len(n_groups) + 1 + 20           # + the mismatch hint's few lookups
    assert hdf5_checks.MAX_DEPTH == 32


def test_max_characters_per_token_is_bounded(tmp_path, capsys):
    d = ckpt(tmp_path)
    opts = json.loads((d / "options.json").read_text())
    opts["char_cnn"]["max_characters_per_token"] = 1048576
    (d / "options.json").write_text(json.dumps(opts))
    code, err = cli(["info", "--checkpoint", d], capsys)
    assert code == 1 and "max_characters_per_token" in err and str(MAX_CHARACTERS_PER_TOKEN) in err
    opts["char_cnn"]["max_characters_per_token"] = 4          # narrower than a 5-wide filter
    (d / "options.json").write_text(json.dumps(opts))
    with pytest.raises(CheckpointError, match="wider than the token"):
        load_checkpoint(d)


# ---- text inputs ------------------------------------------------------------------------------
@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_embed_refuses_devices_and_fifos(tmp_path, capsys):
    code, err = cli(["embed", "/dev/zero", "-o", tmp_path / "o.hdf5", "--checkpoint", SOURCE], capsys)
    assert code == 1 and "/dev/zero" in err and "device" in err
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    code, err = cli(["embed", fifo, "-o", tmp_path / "o.hdf5", "--checkpoint", SOURCE], capsys)
    assert code == 1 and "FIFO" in err
    assert not (tmp_path / "o.hdf5").exists()


def test_line_reading_is_one_pass(tmp_path, monkeypatch):
    """Linear time by construction: every byte is read once, one readline per line."""
    from elmo_engine.io.datasets import sentences, textio

    path = tmp_path / "many.txt"
    n = 20_000
    path.write_text("".join(f"w{i}\n" for i in range(n)), encoding="utf-8")
    calls, read = [0], [0]
    real = textio.open_binary

    class Counting:
        def __init__(self, fh):
            self.fh = fh

        def readline(self, limit=-1):
            calls[0] += 1
            data = self.fh.readline(limit)
            read[0] += len(data)
            return data

        def close(self):
            self.fh.close()

    monkeypatch.setattr(textio, "open_binary", lambda p: Counting(real(p)))
    toks = sentences.read_token_lines(path)
    assert len(toks) == n and toks[-1] == [f"w{n - 1}"]
    assert calls[0] == n + 1 and read[0] == path.stat().st_size


def test_text_is_capped(tmp_path, monkeypatch):
    from elmo_engine.io.datasets import sentences

    path = tmp_path / "big.txt"
    path.write_text("a b c\n" * 1000, encoding="utf-8")
    monkeypatch.setattr(sentences, "MAX_FILE_BYTES", 4000)
    monkeypatch.setattr(sentences.iter_sentences, "__defaults__",
                        (4000, sentences.MAX_SENTENCE_BYTES, None, False))
    with pytest.raises(InputError, match="larger than the limit of 4000 bytes"):
        sentences.read_token_lines(path)


def test_one_reader_for_bom_nul_and_invisible_characters(tmp_path):
    from elmo_engine.analysis.contexts.neighbour_corpus import read_corpus
    from elmo_engine.io.datasets.sentences import read_sentences, read_token_lines

    bom = tmp_path / "bom.txt"
    bom.write_bytes("\ufeffbank of the river\nthe\u200bbank\n".encode("utf-8"))
    assert read_token_lines(bom) == [["bank", "of", "the", "river"], ["the", "bank"]]
    assert read_sentences(bom) == ["bank of the river", "the bank"]
    assert read_corpus(bom).sentences == [["bank", "of", "the", "river"], ["the", "bank"]]
    nul = tmp_path / "nul.txt"
    nul.write_bytes(b"fine\nbad\x00line\n")
    for reader in (read_token_lines, read_sentences, read_corpus):
        with pytest.raises(InputError, match=r"nul.txt:2: holds NUL bytes"):
            reader(nul)
    zw = tmp_path / "zw.txt"
    zw.write_bytes("fine\n\u200b\n".encode("utf-8"))
    with pytest.raises(InputError, match=r"zw.txt:2: empty line"):
        read_token_lines(zw)                           # line-keyed output: refused, named
    assert read_sentences(zw) == ["fine"] and read_corpus(zw).sentences == [["fine"]]  # skipped


# ---- outputs ----------------------------------------------------------------------------------
def test_an_output_never_replaces_an_input(tmp_path, capsys):
    text = tmp_path / "in.txt"
    text.write_text("the bank\n", encoding="utf-8")
    link = tmp_path / "link.txt"
    link.symlink_to(text)
    hard = tmp_path / "hard.txt"
    os.link(text, hard)
    for out in (text, link, hard):
        code, err = cli(["embed", text, "-o", out, "--checkpoint", SOURCE], capsys)
        assert code == 1 and "is also an input" in err and str(out) in err
    code, err = cli(["embed", text, "-o", tmp_path / "w.hdf5", "--checkpoint", SOURCE / "lm_weights.hdf5"],
                    capsys)
    assert code == 0
    weights = tmp_path / "ck" / "lm_weights.hdf5"
    ckpt(tmp_path)
    code, err = cli(["embed", text, "-o", weights, "--checkpoint", tmp_path / "ck"], capsys)
    assert code == 1 and "is also an input" in err
    ws = workspace(tmp_path)
    code, err = cli(["export", "report", ws, "-o", tmp_path, "--force"], capsys)
    assert code == 1 and "holds an input" in err
    assert text.read_text(encoding="utf-8") == "the bank\n"
    assert (weights.read_bytes() == (SOURCE / "lm_weights.hdf5").read_bytes())


def test_a_folder_as_output_is_named_and_a_mode_is_kept(tmp_path, capsys):
    text = tmp_path / "in.txt"
    text.write_text("the bank\n", encoding="utf-8")
    folder = tmp_path / "out.hdf5"
    folder.mkdir()
    code, err = cli(["embed", text, "-o", folder, "--checkpoint", SOURCE], capsys)
    assert code == 1 and str(folder) in err and ".part" not in err
    out = tmp_path / "keep.hdf5"
    out.write_bytes(b"old")
    os.chmod(out, 0o600)
    code, _ = cli(["embed", text, "-o", out, "--checkpoint", SOURCE, "--format", "hdf5", "--force"],
                  capsys)
    assert code == 0 and stat.S_IMODE(out.stat().st_mode) == 0o600
    with h5py.File(out, "r") as fh:
        assert fh["0"].shape[1] == 2


# ---- workspaces and probe results -------------------------------------------------------------
def probe_run() -> dict:
    score = {"dev": 0.5, "test": 0.25, "macro_f1": 0.2}
    return {"task": "pos", "name": "run", "label": "upos", "model": "m",
            "layers": [{"layer": k, **score, "per_label": {"NOUN": {"f1": 0.5}}} for k in range(3)],
            "mix": {"weights": [0.2, 0.3, 0.5], "gamma": 1.5, **score},
            "baselines": {"majority": 0.1}, "counts": {"train": 3, "dev": 1, "test": 1, "labels": 2},
            "config": {"lr": 0.01}, "history": {"layers": [[0.1]]}, "wall_time_s": 1.0}


def workspace(tmp_path, **parts) -> Path:
    from elmo_engine.io.workspace_file import WorkspaceData, save_workspace

    data = WorkspaceData(sentences=["the bank"], views=parts.pop("views", {}),
                         probe_runs=parts.pop("probe_runs", []), arrays=parts.pop("arrays", {}))
    return save_workspace(tmp_path / "w.elmows.json", data)


def test_a_valid_probe_run_round_trips():
    from elmo_engine.analysis.probes.experiment import ProbeResult

    r = ProbeResult.from_dict(probe_run())
    assert r.mix.weights == [0.2, 0.3, 0.5] and r.layers[2].layer == 2


@pytest.mark.parametrize("change, key", [
    (lambda d: d["layers"][1].update(layer=99), "layers[1].layer"),
    (lambda d: d["layers"][0].update(test="0.9"), "layers[0].test"),
    (lambda d: d.update(mix=[0.2, 0.3]), "mix"),
    (lambda d: d["mix"].update(weights=[0.2, "x", 0.5]), "mix.weights[1]"),
    (lambda d: d["counts"].update(train=-3), "counts.train"),
    (lambda d: d.update(layers=[]), "layers"),
    (lambda d: d.pop("model"), "model"),
])
def test_bad_probe_runs_are_named_key_by_key(tmp_path, capsys, change, key):
    run = copy.deepcopy(probe_run())
    change(run)
    path = workspace(tmp_path, probe_runs=[run])
    code, err = cli(["export", "report", path, "-o", tmp_path / "rep", "--checkpoint", SOURCE], capsys)
    assert code == 1 and "probe_runs[0]" in err and f"'{key}'" in err
    assert not (tmp_path / "rep").exists()


def test_views_nested_900_deep(tmp_path, capsys):
    deep: dict = {}
    cur = deep
    for _ in range(900):
        cur["x"] = {}
        cur = cur["x"]
    path = tmp_path / "w.elmows.json"
    path.write_text(json.dumps({"format": "elmo-explorer-workspace", "version": 1,
                                "sentences": ["the bank"], "views": {"contexts": deep}}))
    code, err = cli(["export", "report", path, "-o", tmp_path / "rep", "--checkpoint", SOURCE], capsys)
    assert code == 1 and "nested deeper than 32 levels" in err


def _rewrite_member(npz: Path, name: str, payload: bytes, method=zipfile.ZIP_STORED) -> None:
    with zipfile.ZipFile(npz, "w", method) as zf:
        zf.writestr(name, payload)


def test_npz_header_that_lies_about_its_shape(tmp_path, capsys):
    from elmo_engine.io.workspace_file import load_workspace

    path = workspace(tmp_path, arrays={"a": np.arange(3, dtype=np.float64)})
    npz = next(tmp_path.glob("w.*.npz"))
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f8", "fortran_order": False,
                                              "shape": (10 ** 10,)})
    _rewrite_member(npz, "a.npy", buf.getvalue() + bytes(24))
    before = _peak_kb()
    with pytest.raises(InputError, match=r"declares shape \(10000000000,\)"):
        load_workspace(path)
    assert _peak_kb() - before < 50_000
    code, err = cli(["export", "report", path, "-o", tmp_path / "rep", "--checkpoint", SOURCE], capsys)
    assert code == 1 and "declares shape" in err


def test_npz_of_zeros_over_the_size_cap_is_refused_without_reading(tmp_path, monkeypatch):
    """The 3 MB npz of 3 GB of zeros, scaled down: the cap is checked from the headers."""
    from elmo_engine.io import npz_lazy
    from elmo_engine.io.workspace_file import load_workspace

    path = workspace(tmp_path, arrays={"a": np.zeros(3)})
    npz = next(tmp_path.glob("w.*.npz"))
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.zeros(4 * MB // 8))   # 4 MB of zeros deflate to ~4 kB
    _rewrite_member(npz, "a.npy", buf.getvalue(), zipfile.ZIP_DEFLATED)
    monkeypatch.setattr(npz_lazy, "MAX_TOTAL_BYTES", 1 * MB)
    with pytest.raises(InputError, match=f"more than {MB} bytes in all"):
        load_workspace(path)


def test_workspace_arrays_are_loaded_lazily_and_exactly(tmp_path):
    from elmo_engine.io.workspace_file import load_workspace

    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    path = workspace(tmp_path, arrays={"a": a, "b": np.ones(2, dtype=np.int64)})
    arrays = load_workspace(path).data.arrays
    assert sorted(arrays) == ["a", "b"] and arrays.shape("a") == (3, 4)
    assert arrays._loaded == {}                      # nothing read at load
    np.testing.assert_array_equal(arrays["a"], a)
    assert list(arrays._loaded) == ["a"]


# ---- the last resort and the probe keys -------------------------------------------------------
def test_memory_error_anywhere_is_one_line_and_a_logged_traceback(tmp_path, capsys, monkeypatch):
    from elmo_engine.cli import info

    monkeypatch.setenv("ELMO_EXPLORER_LOG_DIR", str(tmp_path / "logs"))

    def boom(args):
        raise MemoryError()

    monkeypatch.setattr(info, "run", boom)
    code, err = cli(["info", "--checkpoint", SOURCE], capsys)
    assert code == 1 and "out of memory" in err and "cli-errors.log" in err
    log = (tmp_path / "logs" / "cli-errors.log").read_text()
    assert "Traceback" in log and "MemoryError" in log and "in boom" in log
    monkeypatch.setattr(info, "run", lambda args: {}["missing"])
    code, err = cli(["info", "--checkpoint", SOURCE], capsys)
    assert code == 1 and "unexpected KeyError" in err


def test_probe_train_and_test_keys_of_one_file_stay_apart(tmp_path, monkeypatch):
    from elmo_engine.analysis.probes.tasks import TaskFiles, load_task_data
    from elmo_engine.io.datasets import wordnet, wsd

    xml, keys_a, keys_b = tmp_path / "x.xml", tmp_path / "a.key", tmp_path / "b.key"
    seen = []
    monkeypatch.setattr(wsd, "read_wsd", lambda p, k, wordnet=None: seen.append((p, k)) or [])

    class WN:
        first_sense = None

    monkeypatch.setattr(wordnet, "load_wordnet", lambda path=None: WN())
    load_task_data(TaskFiles("wsd", xml, xml, None, keys_a, keys_b, None))
    assert seen == [(xml, keys_a), (xml, keys_b)]


@pytest.mark.parametrize("argv", [
    ["embed", "{x}", "-o", "{x}"],
    ["export", "vectors", "{x}", "-o", "{x}", "--force"],
    ["contexts", "--word", "bank", "--sentences", "{x}", "--json", "-o", "{x}"],
    ["project", "{x}", "-o", "{x}"],
    ["layers", "{x}", "--json", "-o", "{x}"],
    ["probe", "--task", "tsv", "--train", "{x}", "--test", "{y}", "--out", "{y}"],
    ["contexts", "--word", "bank", "--json", "-o", "{z}", "--matrices", "{z}"],
])
def test_same_path_arguments_are_refused_before_anything_runs(tmp_path, capsys, argv):
    x, y = tmp_path / "x.txt", tmp_path / "y.txt"
    for p in (x, y):
        p.write_text("the bank\n", encoding="utf-8")
    z = tmp_path / "z.json"
    code, err = cli([a.format(x=x, y=y, z=z) for a in argv], capsys)
    assert code == 1 and ("is also an input" in err or "two outputs" in err)
    assert x.read_text(encoding="utf-8") == y.read_text(encoding="utf-8") == "the bank\n"
    assert not z.exists()


def test_a_checkpoint_path_that_leads_nowhere_says_why(tmp_path, capsys):
    """A review: ``--checkpoint`` of a symbolic-link loop said "no such file or directory"."""
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    (tmp_path / "dangling").symlink_to(tmp_path / "not-there")
    sentences = tmp_path / "s.txt"
    sentences.write_text("The bank was closed .\n", encoding="utf-8")
    for name, why in (("a", "a loop of symbolic links"),
                      ("dangling", "a symbolic link to nothing (its target does not exist)"),
                      ("missing", "no such file or directory")):
        assert main(["layers", str(sentences), "--checkpoint", str(tmp_path / name)]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [f"elmo-explorer: error: {tmp_path / name}: {why}"], err
