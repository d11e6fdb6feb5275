"""``elmo-explorer embed`` end to end (docs/checkpoint-format.md §11.1 layout)."""
from __future__ import annotations

import json
import subprocess
import sys

import h5py
import numpy as np
import pytest

from elmo_engine.cli.main import main

from support import FIXTURES


@pytest.fixture()
def sentences_file(tmp_path):
    lists = json.loads((FIXTURES / "bilm-tf" / "model" / "lm_embeddings_sentences.json").read_text())
    order = [lists[k][i] for i in range(10) for k in range(3)]
    p = tmp_path / "in.txt"
    p.write_text("\n".join(order) + "\n", encoding="utf-8")
    return p, order


def test_embed_hdf5_layout_and_stateful_reference(sentences_file, tmp_path):
    inp, order = sentences_file
    out = tmp_path / "out.hdf5"
    ckpt = str(FIXTURES / "bilm-tf" / "model")
    assert main(["embed", str(inp), "-o", str(out), "--checkpoint", ckpt, "--stateful",
                 "--batch-size", "3", "--pretokenized"]) == 0
    with h5py.File(out, "r") as fh:
        assert len(fh) == 31
        index = json.loads(fh["sentence_to_index"][0])
        assert index[order[4]] == "4"
        with h5py.File(FIXTURES / "bilm-tf" / "expected" / "lm_embeddings_1.hdf5", "r") as ref:
            exp = ref["2"][()]                               # list 1, sentence 2 = line 7
            got = fh["7"][()]
            assert got.shape == (3, exp.shape[1], 32)
            np.testing.assert_allclose(got[2, :, :16], exp[0], atol=1e-5, rtol=0)
            np.testing.assert_allclose(got[2, :, 16:], exp[1], atol=1e-5, rtol=0)


@pytest.mark.parametrize("layers,shape", [("top", (None, 32)), ("average", (None, 32))])
def test_embed_layers_and_npz(sentences_file, tmp_path, layers, shape):
    inp, order = sentences_file
    out = tmp_path / "out.npz"
    ckpt = str(FIXTURES / "allennlp")
    assert main(["embed", str(inp), "-o", str(out), "--checkpoint", ckpt, "--layers", layers,
                 "--pretokenized"]) == 0
    full = tmp_path / "full.hdf5"
    assert main(["embed", str(inp), "-o", str(full), "--checkpoint", ckpt, "--pretokenized"]) == 0
    with np.load(out, allow_pickle=False) as z, h5py.File(full, "r") as fh:
        arr = z["3"]
        assert arr.shape == (len(order[3].split()), 32)
        expected = fh["3"][()][2] if layers == "top" else fh["3"][()].mean(0)
        np.testing.assert_allclose(arr, expected, atol=1e-6)
        assert json.loads(str(z["sentence_to_index"]))[order[0]] == "0"


def test_bad_input_messages(tmp_path, capsys):
    ckpt = str(FIXTURES / "allennlp")
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"\n \n")
    out = tmp_path / "o.hdf5"
    assert main(["embed", str(bad), "-o", str(out), "--checkpoint", ckpt]) == 1
    assert "bad.txt: no sentences in the file" in capsys.readouterr().err
    bad.write_bytes(b"ok\n\xff\xfe bytes\n")
    assert main(["embed", str(bad), "-o", str(out), "--checkpoint", ckpt]) == 1
    assert "bad.txt:2: not valid UTF-8" in capsys.readouterr().err
    bad.write_text("a fine line\n", encoding="utf-8")
    assert main(["embed", str(bad), "-o", str(out), "--checkpoint", str(tmp_path)]) == 1
    assert "cannot find" in capsys.readouterr().err
    assert not out.exists() and not list(tmp_path.glob("*.part"))


def test_interrupted_run_leaves_no_output(sentences_file, tmp_path, monkeypatch):
    inp, _ = sentences_file
    out = tmp_path / "out.hdf5"
    from elmo_engine.embed import embedder

    def boom(self, *a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(embedder.Embedder, "embed", boom)
    assert main(["embed", str(inp), "-o", str(out), "--checkpoint", str(FIXTURES / "allennlp")]) == 130
    assert not out.exists() and not list(tmp_path.glob(".out*"))


def test_entry_point_runs_as_a_program(sentences_file, tmp_path):
    inp, _ = sentences_file
    out = tmp_path / "o.hdf5"
    r = subprocess.run([sys.executable, "-m", "elmo_explorer.entry", "embed", str(inp), "-o", str(out),
                        "--checkpoint", str(FIXTURES / "allennlp"), "--tokenize"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    with h5py.File(out, "r") as fh:
        assert len(fh) == 31
