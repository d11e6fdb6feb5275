"""``embed`` in bounded memory (issue 29 item 4): the streamed output equals the in-memory
embedder's vectors (float32 to 1e-6, float16 to its rounding), sentences are pulled lazily, a
failure midway leaves no output, ``--split-sentences`` splits a paragraph, the size warning
fires above its (injected) threshold."""
from __future__ import annotations

import json
import re

import h5py
import numpy as np
import pytest

from elmo_engine.cli.main import main
from elmo_engine.embed.embedder import Embedder
from elmo_engine.errors import InputError
from elmo_engine.io import embeddings_file as ef
from elmo_engine.io.datasets.text_input import (iter_text_input, read_text_input,
                                                scan_text_input)
from elmo_engine.model.checkpoint import load_checkpoint
from elmo_engine.io.datasets.corpus_text import split_sentences

from support import FIXTURES

CKPT = FIXTURES / "allennlp"
WORDS = ("the bank river money loan water fish boat account of a and she he went closed "
         "rained open near far old new").split()


def _lines(n: int):
    """``n`` sentences of 3–14 words, deterministic."""
    rng = np.random.default_rng(7)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(3, 15)))) for _ in range(n)]


@pytest.fixture(scope="module")
def model():
    return load_checkpoint(CKPT, device="cpu")


@pytest.fixture()
def text_file(tmp_path):
    p = tmp_path / "in.txt"
    p.write_text("\n".join(_lines(40)) + "\n", encoding="utf-8")
    return p


def _datasets(path):
    with h5py.File(path, "r") as fh:
        index = json.loads(fh["sentence_to_index"][0])
        n = len(fh) - 1
        return [fh[str(i)][()] for i in range(n)], index


def test_streamed_output_equals_the_in_memory_embedder(text_file, tmp_path, model):
    tokens = read_text_input(text_file).tokens
    expected = Embedder(model, device="cpu").embed(tokens)              # (3, n, 32) each
    out32, out16 = tmp_path / "o32.hdf5", tmp_path / "o16.hdf5"
    base = ["--checkpoint", str(CKPT), "--device", "cpu"]
    assert main(["embed", str(text_file), "-o", str(out32), *base]) == 0
    assert main(["embed", str(text_file), "-o", str(out16), *base, "--dtype", "float16"]) == 0
    got32, index = _datasets(out32)
    got16, _ = _datasets(out16)
    assert len(got32) == len(tokens) == 40
    assert index[" ".join(tokens[5])] in {str(i) for i, t in enumerate(tokens) if t == tokens[5]}
    for exp, a32, a16 in zip(expected, got32, got16):
        assert a32.dtype == np.float32 and a16.dtype == np.float16
        assert a32.shape == a16.shape == exp.shape
        np.testing.assert_allclose(a32, exp, rtol=0, atol=1e-6)
        # float16 rounding: half an ulp (2^-11 relative) plus the float32 paths' own difference
        np.testing.assert_allclose(a16.astype(np.float32), exp, rtol=2 ** -10, atol=1e-5)
        assert np.abs(a16.astype(np.float32) - exp).max() > 0        # it really was rounded


@pytest.mark.parametrize("stateful", [False, True])
def test_chunks_are_pulled_lazily_and_match_one_pass(model, tmp_path, stateful):
    tokens = [s.split() for s in _lines(30)]
    emb = Embedder(model, device="cpu", cache_size=0)
    if stateful:
        expected = emb.embed_stateful(tokens, batch_size=4)
        emb.reset_state()
    else:
        expected = emb.embed(tokens)
    pulled = []
    first_add = []

    def sentences():
        for t in tokens:
            pulled.append(t)
            yield t

    real_add = ef.EmbeddingsWriter.add

    class Spy(ef.EmbeddingsWriter):
        def add(self, key, arr):
            if not first_add:
                first_add.append(len(pulled))
            real_add(self, key, arr)

    out = tmp_path / "o.npz"
    orig = ef.EmbeddingsWriter
    ef.EmbeddingsWriter = Spy
    try:
        summary = ef.write_embeddings(out, sentences(), emb, "npz", stateful=stateful,
                                      batch_size=4, chunk_tokens=40)
    finally:
        ef.EmbeddingsWriter = orig
    assert summary.sentences == 30 and summary.tokens == sum(len(t) for t in tokens)
    assert first_add[0] < 30                    # written before the input was all read
    if stateful:
        assert first_add[0] % 4 == 0            # chunks end on a batch boundary
    with np.load(out, allow_pickle=False) as z:
        for i, exp in enumerate(expected):
            np.testing.assert_allclose(z[str(i)], exp, rtol=0, atol=1e-6)
        assert len(json.loads(str(z["sentence_to_index"]))) == len({" ".join(t) for t in tokens})


def test_a_failure_midway_leaves_no_output(model, tmp_path):
    emb = Embedder(model, device="cpu", cache_size=0)
    out = tmp_path / "o.hdf5"

    def sentences():
        for i, line in enumerate(_lines(30)):
            if i == 20:
                raise InputError("a bad line", path=tmp_path / "in.txt", line=21)
            yield line.split()

    with pytest.raises(InputError, match="a bad line"):
        ef.write_embeddings(out, sentences(), emb, "hdf5", chunk_tokens=30)
    assert sorted(p.name for p in tmp_path.iterdir()) == []       # no output, no temp file
    out.write_bytes(b"keep")                                       # an existing file stays
    with pytest.raises(InputError):
        ef.write_embeddings(out, sentences(), emb, "hdf5", chunk_tokens=30)
    assert out.read_bytes() == b"keep"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.hdf5"]


def test_cli_failure_midway_leaves_no_output(text_file, tmp_path, monkeypatch, capsys):
    calls = [0]
    real = Embedder.embed

    def embed(self, sentences, state=None):
        calls[0] += 1
        if calls[0] == 2:
            raise InputError("injected failure in the second chunk")
        return real(self, sentences, state)

    monkeypatch.setattr(Embedder, "embed", embed)
    monkeypatch.setattr(ef, "CHUNK_TOKENS", 64)                 # several chunks
    out = tmp_path / "out.hdf5"
    assert main(["embed", str(text_file), "-o", str(out), "--checkpoint", str(CKPT)]) == 1
    assert "injected failure" in capsys.readouterr().err and calls[0] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]


def test_a_bad_line_is_found_before_anything_is_written(text_file, tmp_path, capsys):
    lines = text_file.read_text(encoding="utf-8").splitlines()
    lines[30] = "x" * 40 + "\x00"                                 # a NUL byte on line 31
    text_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out.hdf5"
    assert main(["embed", str(text_file), "-o", str(out), "--checkpoint", str(CKPT)]) == 1
    err = capsys.readouterr().err
    # the program's prefix (with the command's name or without it, as the CLI convention has it)
    assert re.match(r"elmo-explorer( embed)?: error: .*in\.txt:31: holds NUL bytes", err), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]


def test_split_sentences_splits_a_paragraph(tmp_path, model):
    para = "The bank was closed . She went to the river . It rained near the old boat ."
    inp = tmp_path / "para.txt"
    inp.write_text(para + "\nthe loan was new\n", encoding="utf-8")
    one, split = tmp_path / "one.hdf5", tmp_path / "split.hdf5"
    base = ["--checkpoint", str(CKPT), "--pretokenized"]
    assert main(["embed", str(inp), "-o", str(one), *base]) == 0
    assert main(["embed", str(inp), "-o", str(split), *base, "--split-sentences"]) == 0
    got_one, _ = _datasets(one)
    got, index = _datasets(split)
    assert len(got_one) == 2 and len(got) == 4
    assert [a.shape[1] for a in got] == [5, 6, 7, 4]
    assert index == {"The bank was closed .": "0", "She went to the river .": "1",
                     "It rained near the old boat .": "2", "the loan was new": "3"}
    alone = Embedder(model, device="cpu").embed([["She", "went", "to", "the", "river", "."]])[0]
    np.testing.assert_allclose(got[1], alone, rtol=0, atol=1e-6)
    # the splitter is the trainer's: the reader yields what it yields
    assert [t for _, t in iter_text_input(inp, True, split=split_sentences)][:3] == \
        split_sentences(para.split())
    scan = scan_text_input(inp, True, split=split_sentences)
    assert (scan.sentences, scan.tokens, scan.longest) == (4, 22, 7)


def test_size_warning_fires_above_the_threshold(text_file, tmp_path, monkeypatch, capsys):
    tokens = sum(len(t) for t in read_text_input(text_file).tokens)
    expected = tokens * 1 * 32 * 2                                # top layer, 2P = 32, float16
    assert ef.expected_output_bytes(tokens, 3, 32, "top", "float16") == expected
    assert ef.expected_output_bytes(tokens, 3, 32, "all", "float32") == tokens * 3 * 32 * 4
    args = ["embed", str(text_file), "--checkpoint", str(CKPT), "--layers", "top",
            "--dtype", "float16"]
    monkeypatch.setattr(ef, "SIZE_WARNING_BYTES", expected)       # at the threshold: silent
    assert main([*args[:2], "-o", str(tmp_path / "a.hdf5"), *args[2:]]) == 0
    assert "warning:" not in capsys.readouterr().err
    monkeypatch.setattr(ef, "SIZE_WARNING_BYTES", expected - 1)   # one byte over: warned
    assert main([*args[:2], "-o", str(tmp_path / "b.hdf5"), *args[2:]]) == 0
    err = capsys.readouterr().err
    assert "warning: the output will take about" in err and f"{expected:,} bytes" in err
    assert ef.size_warning(10 ** 9, 10 ** 9) is None
    assert "about 1.0 GB" in ef.size_warning(10 ** 9 + 1, 10 ** 9)


def test_streaming_reader_matches_the_whole_file_reader(tmp_path):
    plain = tmp_path / "plain.txt"
    plain.write_text("The bank .\n\n# not a comment here\nShe went home\n", encoding="utf-8")
    grouped = tmp_path / "grouped.tsv"
    grouped.write_text("# senses\nmoney\tThe bank lent it .\n\nriver\tThe bank of the river\n",
                       encoding="utf-8")
    for path in (plain, grouped):
        whole = read_text_input(path)
        scan = scan_text_input(path)
        assert [t for _, t in iter_text_input(path)] == whole.tokens
        assert [n for n, _ in iter_text_input(path)] == whole.lines
        assert scan.grouped == whole.grouped and scan.sentences == len(whole.tokens)
        assert scan.blank_note() == whole.blank_note() != ""
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n", encoding="utf-8")
    with pytest.raises(InputError, match="no sentences"):
        scan_text_input(empty)


def test_cached_word_vectors_do_not_pin_their_batch(model):
    """A cached type's vector is its own copy: a row view kept the whole batch's tensor alive
    while any of its words stayed cached, so that memory grew with a streamed input."""
    emb = Embedder(model, device="cpu", cache_size=0)
    emb.token_vectors([f"w{i}" for i in range(300)])
    width = emb.opts.projection_dim
    vec = emb._types["w7"]
    assert vec.shape == (width,)
    assert vec.untyped_storage().nbytes() == width * vec.element_size()


def test_export_vectors_streams_like_embed(tmp_path, model):
    """``export vectors`` reads and splits as ``embed`` does and writes the same vectors; with
    ``--word`` only the word's sentences are embedded and the file keeps their numbers."""
    para = "The bank was closed . She went to the river . It rained near the old boat ."
    inp = tmp_path / "para.txt"
    inp.write_text(para + "\nthe loan was new\nthe river bank\n", encoding="utf-8")
    base = ["--checkpoint", str(CKPT), "--pretokenized", "--split-sentences"]
    assert main(["embed", str(inp), "-o", str(tmp_path / "e.hdf5"), *base]) == 0
    assert main(["export", "vectors", str(inp), "-o", str(tmp_path / "x.hdf5"), *base]) == 0
    got_e, index_e = _datasets(tmp_path / "e.hdf5")
    got_x, index_x = _datasets(tmp_path / "x.hdf5")
    assert len(got_x) == 5 and index_x == index_e
    for a, b in zip(got_e, got_x):
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-6)
    assert main(["export", "vectors", str(inp), "-o", str(tmp_path / "w.npz"), *base,
                 "--word", "river", "--layers", "top"]) == 0
    with np.load(tmp_path / "w.npz", allow_pickle=False) as z:
        assert list(z["sentence"]) == [1, 4] and list(z["token"]) == [4, 1]
        np.testing.assert_allclose(z["vectors"][0], got_e[1][-1, 4], rtol=0, atol=1e-6)
        np.testing.assert_allclose(z["vectors"][1], got_e[4][-1, 1], rtol=0, atol=1e-6)


@pytest.mark.parametrize("doc", [{}, {"a": "0"}, {"the bank 🙂 é": "0", "x \\ \"y\"": "1"},
                                 {f"sentence {i} " + "w" * 40: str(i) for i in range(30_000)}])
def test_npz_sentence_index_is_encoded_as_it_is_written_as_numpy_writes_it(tmp_path, doc):
    """The npz ``sentence_to_index`` (a 0-d UCS-4 array: 4 bytes a character) is encoded as it
    is written, byte for byte what ``np.savez`` writes of ``json.dumps``."""
    import zipfile

    from elmo_engine.io.embeddings_file import EmbeddingsWriter

    ours, numpys = tmp_path / "a.npz", tmp_path / "b.npz"
    writer = EmbeddingsWriter(ours, "npz")
    for text, key in doc.items():
        writer.index.add(text, key)
    writer.finish()
    writer.close()
    np.savez(numpys, sentence_to_index=np.array(json.dumps(doc)))
    with zipfile.ZipFile(ours) as a, zipfile.ZipFile(numpys) as b:
        assert a.read("sentence_to_index.npy") == b.read("sentence_to_index.npy")
    assert json.loads(str(np.load(ours, allow_pickle=False)["sentence_to_index"])) == doc


def test_a_repeated_sentence_keeps_its_last_key_as_the_dict_did(tmp_path):
    from elmo_engine.io.embeddings_file import EmbeddingsWriter

    writer = EmbeddingsWriter(tmp_path / "r.npz", "npz")
    for text, key in [("a b", "0"), ("c", "1"), ("a b", "2")]:
        writer.index.add(text, key)
    writer.finish()
    writer.close()
    index = np.load(tmp_path / "r.npz", allow_pickle=False)["sentence_to_index"]
    assert json.loads(str(index)) == {"a b": "2", "c": "1"}
