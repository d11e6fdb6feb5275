"""``elmo-explorer index --precision bf16``: offered where ``embed --precision bf16`` is (a GPU, or
a CPU with bf16 units), refused in one line elsewhere; the vectors are stored float16 either way,
bf16 changes only how they are computed. On a host with bf16 units the bf16 index answers queries
(embedded in float32, as ``search`` does) with the same top hit as the float32 index."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from support import FIXTURES, REPO
from elmo_engine import runtime
from elmo_engine.cli.main import main
from elmo_engine.embed.embedder import Embedder
from elmo_engine.errors import InputError
from elmo_engine.index.search import CorpusIndex, query_vectors
from elmo_engine.index.store import MANIFEST, Manifest, Reading, read_manifest
from elmo_engine.model.checkpoint import load_checkpoint

TINY = FIXTURES / "allennlp"
CORPUS = REPO / "resources" / "reference_corpus" / "sentences.txt"
needs_units = pytest.mark.skipif(not runtime.cpu_bf16().offered,
                                 reason="this CPU has no bf16 units (AMX or AVX512_BF16)")


def _corpus(path, n=40, start=0):
    lines = CORPUS.read_text("utf-8").splitlines()[start:start + n]
    path.write_text("\n".join(lines) + "\n", "utf-8")
    return path


def _index(corpus, out, *extra):
    return main(["index", str(corpus), "--out", str(out), "--checkpoint", str(TINY),
                 "--shard-size", "9", "--layer", "0,1,2", "--device", "cpu", *extra])


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    if not runtime.cpu_bf16().offered:
        pytest.skip("this CPU has no bf16 units (AMX or AVX512_BF16)")
    d = tmp_path_factory.mktemp("bf16")
    corpus = _corpus(d / "corpus.txt")
    assert _index(corpus, d / "fp32") == 0
    assert _index(corpus, d / "bf16", "--precision", "bf16") == 0
    return corpus, d / "fp32", d / "bf16"


@needs_units
def test_the_bf16_index_is_marked_and_holds_other_float16_vectors_close_to_fp32(pair):
    _corpus_file, a, b = pair
    ma, mb = read_manifest(a), read_manifest(b)
    assert (ma.precision, mb.precision) == ("fp32", "bf16")
    assert ma.identity() != mb.identity() and ma.n_tokens == mb.n_tokens
    for layer in (1, 2):
        va = np.load(a / f"vectors.L{layer}.npy", allow_pickle=False).astype(np.float32)
        vb = np.load(b / f"vectors.L{layer}.npy", allow_pickle=False)
        assert vb.dtype == np.float16                          # stored as float16 either way
        vb = vb.astype(np.float32)
        cos = (va * vb).sum(1)                                 # unit vectors
        assert not np.array_equal(va, vb)                      # bf16 really ran
        assert np.median(cos) >= 0.999 and np.quantile(cos, 0.001) >= 0.99


@needs_units
def test_bf16_index_gives_the_fp32_top_hit(pair):
    _corpus_file, a, b = pair
    emb = Embedder(load_checkpoint(TINY), device="cpu")       # queries in float32, as search
    outside = CORPUS.read_text("utf-8").splitlines()[200:230]  # queries from other sentences
    ia, ib = CorpusIndex(a), CorpusIndex(b)
    checked = 0
    try:
        inside = [(sid, ia.sentence(sid)) for sid in range(0, ia.manifest.n_sentences, 3)]
        for sid, toks in inside + [(None, t.split(" ")) for t in outside]:
            pos = max(range(len(toks)), key=lambda i: len(toks[i]))
            word = toks[pos]
            if not len(ia.rows_of(word)):
                continue
            vecs = query_vectors(emb, toks, pos, (1, 2))
            for layer in (1, 2):
                for same in (word, None):
                    ha = ia.search(vecs[layer], layer, 2, same)
                    hb = ib.search(vecs[layer], layer, 2, same)
                    if sid is not None:                        # itself, cosine 1 in both
                        assert (ha[0].sentence_id, ha[0].position) == (sid, pos)
                        assert (hb[0].sentence_id, hb[0].position) == (sid, pos)
                        assert hb[0].cosine == pytest.approx(1.0, abs=2e-3)
                        # and its nearest other occurrence (itself left out)
                        row = ia.row_of(sid, pos)
                        ha = ia.search(vecs[layer], layer, 2, same, exclude_row=row)
                        hb = ib.search(vecs[layer], layer, 2, same, exclude_row=row)
                        if not ha:
                            continue                           # the word's only occurrence
                    if len(ha) > 1 and ha[0].cosine - ha[1].cosine < 2e-3:
                        continue                               # a tie within float16 rounding
                    assert (hb[0].sentence_id, hb[0].position) == \
                        (ha[0].sentence_id, ha[0].position)
                    assert hb[0].cosine == pytest.approx(ha[0].cosine, abs=5e-3)
                    checked += 1
    finally:
        ia.close()
        ib.close()
    assert checked >= 20


@needs_units
def test_a_build_is_not_resumed_in_another_precision(pair, capsys):
    corpus, a, _b = pair
    capsys.readouterr()
    assert _index(corpus, a, "--precision", "bf16") == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "another corpus or settings" in err[0]
    assert read_manifest(a).precision == "fp32"


def test_without_bf16_units_index_refuses_bf16_in_one_line(monkeypatch, tmp_path, capsys):
    cpu = dataclasses.replace(runtime.cpu_bf16(), units=None)
    monkeypatch.setattr(runtime, "cpu_bf16", lambda: cpu)
    corpus = _corpus(tmp_path / "c.txt", 5)
    out = tmp_path / "ix"
    capsys.readouterr()
    assert _index(corpus, out, "--precision", "bf16") == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bf16 needs a CPU with bf16 units" in err[0]
    assert not out.exists()                                    # refused before any work


def test_a_manifest_without_precision_is_fp32_and_a_bad_one_is_refused(tmp_path):
    m = Manifest(checksum="0" * 64, checkpoint="x", layers=(1,), dim=4, shard_size=2,
                 n_sentences=1, n_tokens=1, corpus=(), reading=Reading())
    d = json.loads(m.to_json())
    assert d["precision"] == "fp32"
    d.pop("precision")                                          # an index built before bf16
    (tmp_path / MANIFEST).write_text(json.dumps(d), "utf-8")
    assert read_manifest(tmp_path).precision == "fp32"
    d["precision"] = "int4"
    (tmp_path / MANIFEST).write_text(json.dumps(d), "utf-8")
    with pytest.raises(InputError, match="precision 'int4'"):
        read_manifest(tmp_path)
