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


def test_the_default_batch_is_256_rows_and_64_streams_when_stateful(tmp_path, tiny_checkpoint):
    """``--batch-size`` left out: 256 sentences a batch (the chunk's padded tokens bound it
    first), whose vectors are those of 64-row batches up to float rounding; with ``--stateful``
    64 streams, whose vectors are those of ``--batch-size 64`` exactly (a stateful sentence's
    vectors depend on its row, so that default stays the reference protocol's)."""
    from elmo_engine.cli.embed import STATEFUL_BATCH_ROWS, STREAM_BATCH_ROWS, batch_rows
    from elmo_engine.cli.main import build_parser

    def rows(*extra):
        return batch_rows(build_parser(["embed"]).parse_args(["embed", "in.txt", "-o", "o.hdf5",
                                                              *extra]))

    assert (STREAM_BATCH_ROWS, STATEFUL_BATCH_ROWS) == (256, 64)
    assert rows() == 256 and rows("--stateful") == 64 and rows("--batch-size", "7") == 7
    inp = tmp_path / "in.txt"
    words = "the bank of a river rose by the old mill where money was kept".split()
    inp.write_text("".join(" ".join(words[i % 5:i % 5 + 3 + i % 9]) + "\n" for i in range(150)),
                   encoding="utf-8")

    def vectors(name, *extra):
        out = tmp_path / name
        assert main(["embed", str(inp), "-o", str(out), "--checkpoint", str(tiny_checkpoint),
                     "--pretokenized", "--device", "cpu", *extra]) == 0
        with h5py.File(out, "r") as fh:
            return [fh[str(i)][()] for i in range(150)]

    for a, b in zip(vectors("d.hdf5"), vectors("b64.hdf5", "--batch-size", "64")):
        np.testing.assert_allclose(a, b, atol=1e-5, rtol=0)
    stateful = vectors("s.hdf5", "--stateful")
    for a, b in zip(stateful, vectors("s64.hdf5", "--stateful", "--batch-size", "64")):
        np.testing.assert_array_equal(a, b)
    assert any(not np.allclose(a, b, atol=1e-4)
               for a, b in zip(stateful, vectors("s8.hdf5", "--stateful", "--batch-size", "8")))
