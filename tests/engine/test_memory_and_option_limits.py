"""Issue 25 ("hardening, round three"), continued: memory (activations, layers, WordNet zip
entries, native configs, probe labels; commands run in a subprocess under ``RLIMIT_AS``),
training states on ``--resume``, models validated at load, numeric options checked while
parsing. Every CLI case ends with status 0 or 1 and one line, no traceback."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hardening_helpers import ROOT, SOURCE, ckpt, cli

from elmo_engine.cli.main import main


# ---- memory ------------------------------------------------------------------------------------
def run_capped(argv, limit_gb: float = 2.5, timeout: int = 240):
    """Run the CLI in a subprocess whose address space is capped (torch alone maps ~1 GB):
    (status, stderr)."""
    code = ("import resource, sys\n"
            f"lim = int({limit_gb} * (1 << 30))\n"
            "resource.setrlimit(resource.RLIMIT_AS, (lim, lim))\n"
            "from elmo_engine.cli.main import main\n"
            f"sys.exit(main({[str(a) for a in argv]!r}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=timeout, cwd=ROOT)
    assert "Traceback" not in out.stderr, out.stderr
    return out.returncode, out.stderr


def _corpus(path: Path, nbytes: int) -> Path:
    from elmo_engine.analysis.layers.run import reference_corpus_path

    lines = reference_corpus_path().read_text("utf-8").splitlines()
    with open(path, "w", encoding="utf-8") as fh:
        n = i = 0
        while n < nbytes:
            fh.write(lines[i % len(lines)] + "\n")
            n += len(lines[i % len(lines)]) + 1
            i += 1
    return path


@pytest.mark.slow
def test_activations_of_a_big_text_are_capped(tmp_path):
    """A text bigger than what a command holds: ``contexts`` (which holds every activation)
    refuses it in one line; ``layers`` analyses a stated sample and ``export vectors`` streams,
    both within the same 2.5 GB address space (issue 29: bounded memory). 560 kB (~111,000
    tokens): over what ``contexts`` holds (87,381 tokens of the demo model) and over the
    ``layers`` default sample (100,000; here 20,000 to keep the test short); how memory grows
    with the input is measured by
    ``benchmarks/bench_embed_memory.py``."""
    big = _corpus(tmp_path / "big.txt", 560_000)
    code, err = run_capped(["contexts", "--word", "the", "--sentences", big])
    assert code == 1, err
    line = err.strip().splitlines()[-1]
    assert ("limit" in line or "at most" in line) and "tokens" in line, line
    code, err = run_capped(["layers", big, "--json", "-o", tmp_path / "l.json",
                            "--max-tokens", "20000"])
    assert code == 0, err
    assert "analysing a seeded sample of" in err
    doc = json.loads((tmp_path / "l.json").read_text(encoding="utf-8"))
    assert doc["corpus"]["tokens"] <= 20_000 and doc["corpus"]["max_tokens"] == 20_000
    assert 0 < doc["corpus"]["sentences"] < doc["corpus"]["sentences_in_file"]
    code, err = run_capped(["export", "vectors", big, "-o", tmp_path / "v.npz", "--layers",
                            "top", "--dtype", "float16"])
    assert code == 0, err
    import numpy as np

    with np.load(tmp_path / "v.npz", allow_pickle=False) as z:
        n_sentences = len(json.loads(str(z["sentence_to_index"])))
        assert z["0"].dtype == np.float16 and z["0"].ndim == 2 and n_sentences > 1000


def test_the_layer_cap_is_stated_and_the_plan_checked_before_allocating():
    import numpy as np

    from elmo_engine.analysis.layers import contextuality as cx
    from elmo_engine.errors import InputError

    tokens = [["w%d" % (i % 50) for i in range(40)] for _ in range(3000)]   # 120,000 tokens
    with pytest.raises(InputError, match="MiB"):
        old = cx.MAX_PLAN_BYTES
        try:
            cx.MAX_PLAN_BYTES = 64 << 20
            cx.ContextualityAccumulator(tokens, 3, 1024, min_count=5)
        finally:
            cx.MAX_PLAN_BYTES = old
    assert np.isfinite(cx.MAX_PLAN_BYTES)


def test_wordnet_zip_entry_over_the_limit_is_refused_by_its_declared_size(tmp_path,
                                                                          monkeypatch):
    import zipfile

    from elmo_engine.io.datasets import wordnet

    monkeypatch.setattr(wordnet, "MAX_WORDNET_FILE_BYTES", 1 << 20)
    z = tmp_path / "wordnet.zip"
    with zipfile.ZipFile(z, "w", zipfile.ZIP_DEFLATED) as zf:
        with zf.open("wordnet/index.sense", "w") as fh:
            for _ in range(8):
                fh.write(bytes(1 << 20))                    # 8 MB of zeros, ~8 kB stored
    assert z.stat().st_size < 100_000
    with pytest.raises(Exception) as e:
        wordnet.load_wordnet(z)
    assert "index.sense" in str(e.value) and "bytes" in str(e.value)


def test_a_sparse_2_gib_bilm_json_is_not_read_whole(tmp_path, capsys):
    d = tmp_path / "native"
    d.mkdir()
    with open(d / "bilm.json", "wb") as fh:
        fh.write(b'{"format": ')
        fh.truncate(2 << 30)                              # sparse: no disk used
    (d / "bilm.safetensors").write_bytes(b"\0" * 16)
    code, err = cli(["info", "--checkpoint", d], capsys)
    assert code == 1 and "bilm.json" in err and "larger than" in err


def test_probe_label_count_is_capped(tmp_path, capsys):
    from elmo_engine.analysis.probes.tasks import MAX_PROBE_LABELS

    tsv = tmp_path / "labels.tsv"
    with open(tsv, "w", encoding="utf-8") as fh:
        for i in range(MAX_PROBE_LABELS + 5):
            fh.write(f"word\tL{i}\n\n")
    code, err = cli(["probe", "--task", "tsv", "--train", tsv, "--test", tsv,
                     "--out", tmp_path / "o.json", "--checkpoint", SOURCE], capsys)
    assert code == 1 and "labels.tsv" in err and f"{MAX_PROBE_LABELS:,} distinct labels" in err
    assert not (tmp_path / "o.json").exists()


# ---- training states ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from lm_train_helpers import write_corpus

    from elmo_engine.cli.train_lm import main as train_main

    root = tmp_path_factory.mktemp("lm")
    corpus = write_corpus(root / "corpus.txt", 60, seed=1)
    dev = write_corpus(root / "dev.txt", 5, seed=2)
    code = train_main([str(corpus), "--dev", str(dev), "--out", str(root / "out"), "--preset",
                       "tiny", "--max-steps", "2", "--no-progress", "--threads", "1"])
    assert code == 0
    return root


def _resume(trained, tmp_path, edit, capsys):
    from elmo_engine.cli.train_lm import main as train_main

    out = tmp_path / "out"
    shutil.copytree(trained / "out", out)
    state = out / "checkpoint" / "state.json"
    doc = json.loads(state.read_text("utf-8"))
    edit(doc)
    state.write_text(json.dumps(doc), encoding="utf-8")
    code = train_main([str(trained / "corpus.txt"), "--dev", str(trained / "dev.txt"), "--out",
                       str(out), "--preset", "tiny", "--max-steps", "4", "--resume",
                       "--no-progress", "--threads", "1"])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


@pytest.mark.parametrize("edit, field", [
    (lambda d: d.pop("history"), "history"),
    (lambda d: d.__setitem__("train_seconds", "soon"), "train_seconds"),
    (lambda d: d.__setitem__("step", -3), "step"),
    (lambda d: d["history"].pop("dev"), "history.dev"),
])
def test_resume_checks_the_state_document(trained, tmp_path, capsys, edit, field):
    code, err = _resume(trained, tmp_path, edit, capsys)
    assert code == 1 and "state.json" in err and field in err


def test_a_state_whose_config_claims_a_huge_model_is_refused_before_building(trained, tmp_path,
                                                                              capsys):
    def huge(doc):
        doc["config"]["options"]["lstm"]["dim"] = 1 << 20          # 2^20-wide LSTMs: ~6 GB

    code, err = _resume(trained, tmp_path, huge, capsys)
    assert code == 1 and "checkpoint" in err
    assert "does not match" in err or "dim" in err


# ---- models ------------------------------------------------------------------------------------
def _edit_options(tmp_path, change) -> Path:
    d = ckpt(tmp_path, "edited")
    opts = json.loads((d / "options.json").read_text("utf-8"))
    change(opts)
    (d / "options.json").write_text(json.dumps(opts), encoding="utf-8")
    return d


@pytest.mark.parametrize("change, words", [
    (lambda o: o["char_cnn"].__setitem__("max_characters_per_token", 2), ">= 3"),
    (lambda o: o["char_cnn"].__setitem__("max_characters_per_token", 1), ">= 3"),
    (lambda o: o["char_cnn"].__setitem__("max_characters_per_token", 4), "wider than the token"),
    (lambda o: o["lstm"].__setitem__("projection_dim", 128), "projection_dim"),
])
def test_options_that_cannot_work_are_refused_at_load(tmp_path, capsys, change, words):
    d = _edit_options(tmp_path, change)
    for argv in (["info", "--checkpoint", d],
                 ["embed", _text(tmp_path), "-o", tmp_path / "o.hdf5", "--checkpoint", d]):
        code, err = cli(argv, capsys)
        assert code == 1 and "options.json" in err and words in err, err


def _text(tmp_path) -> Path:
    t = tmp_path / "s.txt"
    t.write_text("the bank of the river\n", encoding="utf-8")
    return t


@pytest.mark.parametrize("dataset, layer", [
    ("RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_0", "layer 1"),
    ("CNN/W_cnn_4", "layer 0"),
])
def test_finite_weights_that_overflow_are_refused_naming_the_layer(tmp_path, capsys, dataset,
                                                                   layer):
    import h5py
    import numpy as np

    d = ckpt(tmp_path)
    with h5py.File(d / "lm_weights.hdf5", "r+") as fh:
        ds = fh[dataset]
        ds[...] = np.sign(ds[...] + 1e-3).astype(np.float32) * np.float32(3e38)
    text = _text(tmp_path)
    for argv in (["info", "--check", "--checkpoint", d],
                 ["embed", text, "-o", tmp_path / "o.hdf5", "--checkpoint", d],
                 ["contexts", "--word", "bank", "--sentences", text, "--checkpoint", d],
                 ["layers", text, "--checkpoint", d, "--json", "-o", tmp_path / "l.json"]):
        code, err = cli(argv, capsys)
        assert code == 1 and "not finite" in err and layer in err and "lm_weights.hdf5" in err
    assert not (tmp_path / "o.hdf5").exists() and not (tmp_path / "l.json").exists()


def test_non_finite_vectors_never_reach_an_output():
    import numpy as np

    from elmo_engine.embed.embedder import check_finite_vectors
    from elmo_engine.errors import InputError

    arr = np.zeros((3, 4, 8), np.float32)
    check_finite_vectors(arr, ["a"] * 4)
    arr[2, 1, 3] = np.nan
    with pytest.raises(InputError, match="from layer 2"):
        check_finite_vectors(arr, ["a"] * 4)


# ---- options -----------------------------------------------------------------------------------
@pytest.mark.parametrize("argv, option", [
    (["embed", "x", "-o", "y", "--device", "foo"], "--device"),
    (["train-lm", "a", "--dev", "b", "--out", "c", "--checkpoint-every", "0"], "--checkpoint-every"),
    (["train-lm", "a", "--dev", "b", "--out", "c", "--threads", "-1"], "--threads"),
    (["train-lm", "a", "--dev", "b", "--out", "c", "--dropout", "1.5"], "--dropout"),
    (["train-lm", "a", "--dev", "b", "--out", "c", "--lr", "nan"], "--lr"),
    (["layers", "--threads", "0"], "--threads"),
    (["layers", "--cka-tokens", "1e9"], "--cka-tokens"),
    (["probe", "--task", "demo-pos", "--out", "o", "--epochs", "0"], "--epochs"),
    (["probe", "--task", "demo-pos", "--out", "o", "--min-delta", "-1"], "--min-delta"),
    (["contexts", "--word", "w", "--neighbours", "-1"], "--neighbours"),
    (["project", "x", "-o", "c", "--n-neighbors", "1"], "--n-neighbors"),
    (["project", "x", "-o", "c", "--min-dist", "inf"], "--min-dist"),
    (["eval-lm", "t", "--unroll", "0"], "--unroll"),
    (["export", "vectors", "a", "-o", "b", "--mix-gamma", "nan"], "--mix-gamma"),
    (["embed", "x", "-o", "y", "--batch-size", "many"], "--batch-size"),
])
def test_numeric_options_are_checked_while_parsing(capsys, argv, option):
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 1 and option in err and len(err.strip().splitlines()) == 1, err


def test_every_numeric_option_has_a_checked_type():
    import argparse

    from elmo_engine.cli.main import build_parser

    def walk(p):
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for sub in a.choices.values():
                    yield from walk(sub)
            else:
                yield a

    actions = list(walk(build_parser()))
    assert not [a.dest for a in actions if a.type in (int, float)]
    assert all(a.type is not None for a in actions if a.dest == "device")
