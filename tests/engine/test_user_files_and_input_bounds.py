"""Hardening, round four (issue 38): nothing of the user's is deleted or replaced unless the
command made it; every numeric option has a range; ``lm`` inputs are checked against their limits
before anything is allocated; the softmax's width is checked from its header; a malformed layers
document is one line naming its file. Each case: exit 0 or 1 (2 for usage), one line, no
traceback, nothing harmed (docs/guide/hardening.md, round four)."""
from __future__ import annotations

import argparse
import json
import os
import time
import tracemalloc

import numpy as np
import pytest

from elmo_engine.cli.main import main
from elmo_engine.errors import CheckpointError, InputError
from elmo_engine.io.writing import (MARKER, NotReplaceableError, check_replaceable,
                                    replace_folder_problem)

from hardening_helpers import ROOT, SOURCE, cli, snapshot, workspace

DEMO_SENTENCES = ROOT / "resources" / "demo_sentences.tsv"


def sentences(tmp_path, n_tokens: int = 6, lines: int = 1, name: str = "s.txt"):
    words = ("the bank of the river is here " * (n_tokens // 7 + 1)).split()[:n_tokens]
    path = tmp_path / name
    path.write_text("\n".join(" ".join(words) for _ in range(lines)) + "\n", "utf-8")
    return path


# ---- 1. nothing of the user's is deleted or replaced ------------------------------------------
def _models_folder(tmp_path):
    d = tmp_path / "data" / "models"
    (d / "small").mkdir(parents=True)
    (d / "small" / "options.json").write_text("{}")
    (d / "small" / "weights.hdf5").write_bytes(b"w" * 1000)
    return d


def _index_folder(tmp_path):
    d = tmp_path / "ix"
    (d / "shards").mkdir(parents=True)
    (d / "index.json").write_text("{}")
    (d / "tokens.sqlite").write_bytes(b"SQLite format 3\0")
    return d


def _thesis(tmp_path):
    d = tmp_path / "thesis"
    (d / "chapters").mkdir(parents=True)
    (d / "thesis.tex").write_text("\\documentclass{book}")
    (d / "chapters" / "one.tex").write_text("\\chapter{One}")
    return d


@pytest.mark.parametrize("make, shown", [(_models_folder, "small/options.json"),
                                         (_index_folder, "index.json"),
                                         (_thesis, "chapters/one.tex")])
def test_report_force_never_deletes_a_folder_it_did_not_write(tmp_path, capsys, make, shown):
    folder = make(tmp_path)
    before = snapshot(folder)
    code, err = cli(["report", sentences(tmp_path), "--word", "bank", "-o", folder, "--force",
                     "--device", "cpu"], capsys)
    assert code == 1 and str(folder) in err and shown in err and "--force" in err
    assert snapshot(folder) == before


def test_export_report_and_tsv_force_never_delete_a_users_folder(tmp_path, capsys):
    folder = _thesis(tmp_path)
    before = snapshot(folder)
    ws = workspace(tmp_path, SOURCE)
    code, err = cli(["export", "report", ws, "-o", folder, "--force", "--device", "cpu"], capsys)
    assert code == 1 and "is not a report folder" in err and "thesis.tex" in err
    code, err = cli(["export", "vectors", sentences(tmp_path), "-o", folder, "--format", "tsv",
                     "--force", "--device", "cpu"], capsys)
    assert code == 1 and "is not a projector folder" in err
    assert snapshot(folder) == before


def test_an_earlier_report_is_replaced_but_not_one_with_a_users_file_inside(tmp_path):
    """The whole tree is looked at: an earlier report with a file of the user's added deep
    inside is not replaced; one holding only what its marker lists, or empty folders, is."""
    folder = tmp_path / "r"
    staging = tmp_path / "staging"
    (staging / "figures").mkdir(parents=True)
    (staging / "report.md").write_text("# r")
    (staging / "figures" / "a.png").write_bytes(b"png")
    from elmo_engine.io.writing import write_marker

    write_marker(staging, "report")
    os.replace(staging, folder)
    assert replace_folder_problem(folder, "report") is None
    assert json.loads((folder / MARKER).read_text())["files"] == ["figures/a.png", "report.md"]
    (folder / "figures" / "notes.txt").write_text("mine")             # deep inside
    problem = replace_folder_problem(folder, "report")
    assert problem and "figures/notes.txt" in problem and "did not write" in problem
    assert replace_folder_problem(folder, "projector") and "not a projector folder" in \
        replace_folder_problem(folder, "projector")                   # another kind's marker
    empty = tmp_path / "empty"
    (empty / "a" / "b").mkdir(parents=True)
    assert replace_folder_problem(empty, "report") is None            # empty folders only
    (empty / "a" / "b" / "x").write_text("x")
    assert "a/b/x" in replace_folder_problem(empty, "report")


def test_a_forged_or_broken_marker_does_not_make_a_folder_replaceable(tmp_path):
    folder = _thesis(tmp_path)
    for text in ("[]", "{", json.dumps({"format": "other", "kind": "report", "files": []}),
                 json.dumps({"format": "elmo-explorer-output", "kind": "report",
                             "files": ["thesis.tex"]})):
        (folder / MARKER).write_text(text)
        assert replace_folder_problem(folder, "report") is not None, text
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "empty-target", target_is_directory=True)
    (tmp_path / "empty-target").mkdir()
    with pytest.raises(NotReplaceableError, match="symbolic link"):
        check_replaceable(link, "report", True)
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(NotReplaceableError, match="is not a folder"):
        check_replaceable(tmp_path / "notes.txt", "report", True)


def test_index_never_replaces_files_of_a_folder_without_index_json(tmp_path, capsys):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "tokens.sqlite").write_bytes(b"my database")
    np.save(folder / "vectors.L2.npy", np.arange(6, dtype=np.float32))
    before = snapshot(folder)
    corpus = sentences(tmp_path, lines=3)
    for extra in ([], ["--force"]):
        code, err = cli(["index", corpus, "--out", folder, "--checkpoint", SOURCE,
                         "--device", "cpu", *extra], capsys)
        assert code == 1 and "no index.json" in err and "tokens.sqlite" in err, err
        assert snapshot(folder) == before


def test_models_remove_waits_for_a_running_get(tmp_path, monkeypatch, capsys):
    from model_server import use_data_folder

    from elmo_engine.io import model_store

    use_data_folder(tmp_path / "data", monkeypatch)
    folder = model_store.model_dir("small")
    folder.mkdir(parents=True)
    (folder / "options.json").write_text("{}")
    model_store.staging_dir("small").mkdir(parents=True)
    (model_store.staging_dir("small") / "weights.hdf5.part").write_bytes(b"x" * 100)
    with model_store.download_lock("small", "busy"):     # the lock a running `models get` holds
        before = snapshot(tmp_path / "data")
        code, err = cli(["models", "remove", "small"], capsys)
        assert code == 1 and "is being downloaded" in err and "small.lock" in err
        assert snapshot(tmp_path / "data") == before
    assert main(["models", "remove", "small"]) == 0       # once it has ended
    assert not folder.exists() and not model_store.staging_dir("small").exists()


# ---- 2. every numeric option has a range -------------------------------------------------------
def _actions_of_every_command():
    """(the command's words, the action) of every option of every command's parser."""
    from elmo_engine.cli.main import build_parser

    def walk(p, path):
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, sub in a.choices.items():
                    yield from walk(sub, path + (name,))
            else:
                yield path, a

    return list(walk(build_parser(), ()))


def _numeric_actions():
    return [(p, a) for p, a in _actions_of_every_command()
            if getattr(a.type, "__name__", None) in ("int", "float")]


def test_every_numeric_option_of_every_command_is_in_the_range_table():
    from elmo_engine.cli.parsing import NUMERIC_LIMITS, UNBOUNDED_OK

    actions = _numeric_actions()
    assert len(actions) > 60                              # every command's options are walked
    missing = sorted({f"{' '.join(p)} {a.option_strings}" for p, a in actions
                      if a.dest not in NUMERIC_LIMITS})
    assert not missing, missing
    unbounded = sorted({a.dest for _, a in actions if NUMERIC_LIMITS[a.dest][1] is None}
                       - UNBOUNDED_OK)
    assert not unbounded, unbounded
    for dest in ("ann_threads", "ann_m", "k", "width", "k_max", "max_occurrences", "seed",
                 "reach_curve", "top_k", "token_budget", "shard_size", "dpi", "width_in"):
        assert dest in {a.dest for _, a in actions}, dest


@pytest.mark.parametrize("argv, option", [
    (["index", "c", "--out", "o", "--ann-threads", "100000"], "--ann-threads"),
    (["index", "c", "--out", "o", "--ann-m", "1000000000"], "--ann-m"),
    (["index", "c", "--out", "o", "--token-budget", "100000000"], "--token-budget"),
    (["search", "ix", "s", "w", "-k", "1000000000"], "-k"),
    (["search", "ix", "s", "w", "--width", "300000000"], "--width"),
    (["search", "ix", "s", "w", "--width", "-1"], "--width"),
    (["senses", "ix", "w", "--k-max", "1000000"], "--k-max"),
    (["senses", "ix", "w", "--max-occurrences", "-1"], "--max-occurrences"),
    (["senses", "ix", "w", "--seed", "-1"], "--seed"),
    (["layers", "--seed", str(2 ** 40)], "--seed"),
    (["lm", "x", "--reach-curve", "1000000000"], "--reach-curve"),
    (["lm", "x", "--top-k", "100000000"], "--top-k"),
    (["report", "x", "--word", "w", "-o", "o", "--dpi", "100000"], "--dpi"),
])
def test_the_issues_numeric_options_are_refused_while_parsing(capsys, argv, option):
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 1 and f"argument {option}" in err and len(err.strip().splitlines()) == 1


def test_every_option_that_takes_words_refuses_bytes_that_are_not_utf8():
    """A word, a sentence or a list of layers is checked by ``text_type``, a file name by
    ``path_type`` or ``path_text``."""
    from pathlib import Path

    from elmo_engine.cli.parsing import path_text, path_type, text_type

    actions = [(p, a) for p, a in _actions_of_every_command()
               if a.nargs != 0 and a.choices is None and a.type not in (path_type, path_text)
               and getattr(a.type, "__name__", None) not in ("int", "float")
               and a.dest not in ("help", "version", "command")]
    assert len(actions) > 40
    unchecked = sorted({f"{' '.join(p)} {a.option_strings or a.dest}" for p, a in actions
                        if a.type is None})
    assert not unchecked, unchecked
    paths = [a for _, a in _actions_of_every_command() if a.type in (Path, path_type, path_text)]
    assert len(paths) > 100 and not [a for a in paths if a.type is Path]   # every one checked
    assert text_type("café") == "café"


@pytest.mark.parametrize("argv, option", [
    (["chars", "caf\udce9"], "WORD"),
    (["search", "ix", "--sentence", "a caf\udce9 b", "--word", "x"], "--sentence"),
    (["contexts", "--word", "b\udcffnk"], "--word"),
    (["embed", "in.txt", "-o", "o.hdf5", "--mix-weights", "1,\udc802"], "--mix-weights"),
    (["models", "get", "sm\udcc3all"], "name"),
])
def test_a_word_with_a_byte_that_is_not_utf8_is_one_line_naming_the_option(capsys, argv,
                                                                           option):
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 1 and len(err.strip().splitlines()) == 1, err
    assert f"argument {option}" in err and "is not UTF-8 text: byte 0x" in err


# ---- 3. work bounded by input size -------------------------------------------------------------
def test_reach_on_a_sentence_over_the_limit_is_refused_before_the_model_loads(tmp_path, capsys,
                                                                              monkeypatch):
    import elmo_engine.model.checkpoint as ck

    def no(*_a, **_k):
        raise AssertionError("the model was loaded before the input was checked")

    monkeypatch.setattr(ck, "load_checkpoint", no)
    path = sentences(tmp_path, n_tokens=201)
    code, err = cli(["lm", path, "--reach", "--no-predictions", "--device", "cpu"], capsys)
    assert code == 1 and f"{path}:1:" in err and "--reach" in err and "201 tokens" in err
    path = sentences(tmp_path, n_tokens=5000, name="long.txt")
    code, err = cli(["lm", path, "--device", "cpu"], capsys)
    assert code == 1 and f"{path}:1:" in err and "5,000 tokens" in err


def test_reach_in_bounded_batches_is_the_one_batch_result(monkeypatch):
    import importlib

    from elmo_engine.embed.embedder import Embedder
    from elmo_engine.model.checkpoint import load_checkpoint
    from elmo_engine.resources import demo_checkpoint_path

    reach_mod = importlib.import_module("elmo_engine.analysis.language_model.reach")
    emb = Embedder(load_checkpoint(demo_checkpoint_path()), device="cpu")
    toks = "the bank of the river is where we sat all day".split()
    whole = reach_mod.reach(emb, toks).distance
    assert reach_mod.reach_rows_per_batch(len(toks), 3, emb.opts.output_dim) >= len(toks)
    monkeypatch.setattr(reach_mod, "REACH_BATCH_BYTES", 1)             # one variant per batch
    assert reach_mod.reach_rows_per_batch(len(toks), 3, emb.opts.output_dim) == 1
    seen = []
    states_mod = importlib.import_module("elmo_engine.analysis.language_model.states")
    real = states_mod.framed_layers                # (reach imports it when it computes)
    monkeypatch.setattr(states_mod, "framed_layers",
                        lambda e, v: seen.append(len(v)) or real(e, v))
    split = reach_mod.reach(emb, toks).distance
    assert seen == [2] * len(toks)                                    # the sentence + 1 variant
    np.testing.assert_allclose(split, whole, atol=1e-6)
    n = len(toks)
    upper = np.triu(np.ones((n, n), bool), 1)
    assert np.abs(split[:, 0][:, upper]).max() <= 1e-6             # forward: nothing on its right
    assert np.abs(split[:, 1][:, upper.T]).max() <= 1e-6           # backward: nothing on its left
    monkeypatch.undo()
    # the longest sentence: the bundled model runs a few variants a batch, the original
    # published model (D 4096, out 512) one
    n = reach_mod.MAX_REACH_TOKENS
    assert 2 <= reach_mod.reach_rows_per_batch(n, 3, emb.opts.output_dim, emb.opts.lstm_dim) < n
    assert reach_mod.reach_rows_per_batch(n, 3, 512, 4096) == 1


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "sparse", "long-sentence", "too-many"])
def test_a_pairs_file_is_checked_before_it_is_read(tmp_path, capsys, kind):
    from elmo_engine.analysis.language_model.pairs import MAX_PAIRS, read_pairs

    path = tmp_path / "pairs.tsv"
    if kind == "dev-zero":
        path = "/dev/zero"
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "sparse":
        with open(path, "wb") as fh:
            fh.truncate(2 << 30)
    elif kind == "long-sentence":
        s = " ".join(["a"] * 20_000)
        path.write_text(f"set\tgood\tbad\nx\t{s}\t{s}\n")
    else:
        assert MAX_PAIRS == 10_000
        path.write_text("set\tgood\tbad\n" + "x\ta b\tb a\n" * 10_001)
    t0 = time.monotonic()
    tracemalloc.start()
    try:
        with pytest.raises(InputError) as e:
            read_pairs(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert str(path) in str(e.value) and time.monotonic() - t0 < 10
    assert peak < 64 << 20, peak
    code, err = cli(["lm", "--pairs", path, "--device", "cpu"], capsys)
    assert code == 1 and str(path) in err


def test_a_softmax_too_wide_for_the_model_is_refused_from_its_header(tmp_path):
    import h5py

    from elmo_engine.model.softmax import load_softmax

    words = ["<S>", "</S>", "<UNK>"] + [f"w{i}" for i in range(997)]
    (tmp_path / "vocab.txt").write_text("\n".join(words) + "\n")
    path = tmp_path / "x_softmax_weights.hdf5"
    with h5py.File(path, "w") as fh:                  # 1000 × 65536 zeros, gzip: a small file
        w = fh.create_dataset("softmax/W", shape=(1000, 65536), dtype="f4", chunks=(8, 65536),
                              compression="gzip", fillvalue=0.0)
        w[0:8] = 0.0
        fh.create_dataset("softmax/b", data=np.zeros(1000, np.float32))
    assert path.stat().st_size < 2 << 20
    tracemalloc.start()
    try:
        with pytest.raises(CheckpointError, match="does not fit the model's top layer") as e:
            load_softmax(tmp_path, output_dim=16)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert str(path) in str(e.value) and "(V, 16)" in str(e.value)
    assert peak < 32 << 20, peak                      # was 262 MB + 131 MB read first


# ---- malformed layers documents ---------------------------------------------------------------
GOOD_LAYERS = json.loads((ROOT / "resources" / "layers_recorded.json").read_text("utf-8"))


def _broken(edit):
    doc = json.loads(json.dumps(GOOD_LAYERS))
    edit(doc)
    return doc


BROKEN = [
    (lambda d: d["contextuality"]["layers"].__setitem__(0, 1), "contextuality.layers[0]"),
    (lambda d: d["contextuality"]["layers"][1]["directions"]["forward"].pop("self_similarity"),
     "contextuality.layers[1].directions.forward.self_similarity"),
    (lambda d: d["contextuality"]["layers"][0].__setitem__("directions", []),
     "contextuality.layers[0].directions"),
    (lambda d: d["contextuality"]["layers"][0].__setitem__("layer", "0"),
     "contextuality.layers[0].layer"),
    (lambda d: d.__setitem__("model", "elmo"), "'model'"),
    (lambda d: d.__setitem__("corpus", []), "'corpus'"),
    (lambda d: d["cka"].__setitem__("matrix", [[1.0]]), "cka.matrix"),
    (lambda d: d["cka"].pop("estimator"), "cka.estimator"),
    (lambda d: d["cka"]["matrix"][0].__setitem__(0, "x"), "cka.matrix[0][0]"),
    (lambda d: d["contextuality"].__setitem__("layers", [d["contextuality"]["layers"][0]] * 65),
     "65 layers"),
]


@pytest.mark.parametrize("edit, key", BROKEN)
def test_a_malformed_layers_json_is_one_line_naming_the_file(tmp_path, capsys, edit, key):
    bad = tmp_path / "layers.json"
    bad.write_text(json.dumps(_broken(edit)))
    out = tmp_path / "out"
    code, err = cli(["report", DEMO_SENTENCES, "--word", "bank", "--layers-json", bad,
                     "-o", out, "--device", "cpu"], capsys)
    assert code == 1 and f"{bad}:" in err and key in err, err
    assert not out.exists()


def test_a_workspace_holding_a_malformed_layers_result_is_one_line_naming_it(tmp_path, capsys):
    from elmo_engine.analysis.report import LAYERS_VIEW, LAYERS_VIEW_VERSION, layers_result
    from elmo_engine.io.workspace_file import load_workspace, save_workspace

    ws = workspace(tmp_path, SOURCE)
    data = load_workspace(ws, verify_checksum=False).data
    data.views[LAYERS_VIEW] = {"version": LAYERS_VIEW_VERSION,
                               "result": _broken(BROKEN[1][0])}
    save_workspace(ws, data)
    assert layers_result(data) is None                 # the app's report leaves it out
    out = tmp_path / "out"
    code, err = cli(["export", "report", ws, "-o", out, "--device", "cpu"], capsys)
    assert code == 1 and f"{ws}:" in err and "self_similarity" in err, err
    assert not out.exists()
