"""``elmo-explorer lm`` on the bundled model: the reach matrix's exact zeros (what each direction
can see), the JSON records, the minimal pairs."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from elmo_engine.analysis.language_model import (accuracy_by_set, reach_curve, read_pairs,
                                                 score_pairs)
from elmo_engine.analysis.language_model.pairs import bundled_pairs
from elmo_engine.cli import main as cli_main
from elmo_engine.embed.embedder import Embedder
from elmo_engine.errors import InputError
from elmo_engine.model.checkpoint import load_checkpoint
from elmo_engine.model.softmax import load_softmax
from elmo_engine.resources import demo_checkpoint_path

FIXTURE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "elmo" / "allennlp"


@pytest.fixture(scope="module")
def demo():
    model = load_checkpoint(demo_checkpoint_path())
    return Embedder(model, device="cpu"), load_softmax(demo_checkpoint_path())


def test_lm_json_reach_on_the_bundled_model(tmp_path, capsys):
    text = tmp_path / "in.txt"
    text.write_text("The keys to the cabinet are on the table.\n", encoding="utf-8")
    code = cli_main(["lm", str(text), "--json", "--reach", "--top-k", "4", "--device", "cpu"])
    doc = json.loads(capsys.readouterr().out)["sentences"][0]
    n = len(doc["tokens"])
    assert code == 0 and n == 10
    for d in ("forward", "backward"):
        assert [r["word"] for r in doc[d]] == doc["tokens"]
        for r in doc[d]:
            assert 0 < r["prob"] <= 1 and r["rank"] >= 1 and len(r["top"]) == 4
            assert r["surprisal"] == pytest.approx(-np.log2(r["prob"]), rel=1e-6)
            assert r["entropy"] > 0
            assert (r["rank"] == 1) == (r["top"][0][0] == r["word"])
    assert len(doc["substitutes"]) == n and doc["perplexity"]["forward"] > 1
    reach = np.array(doc["reach"])                                   # (L+1, 2, n, n)
    assert reach.shape == (3, 2, n, n)
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    assert np.abs(reach[:, 0][:, j > i]).max() <= 1e-6               # forward: nothing on its right
    assert np.abs(reach[:, 1][:, j < i]).max() <= 1e-6               # backward: nothing on its left
    assert np.abs(reach[0][:, i != j]).max() <= 1e-6                 # layer 0: only the token itself
    assert reach[1:, 0][:, j < i].max() > 1e-3 and reach[1:, 1][:, j > i].max() > 1e-3
    assert (np.diagonal(reach[0], axis1=-2, axis2=-1) > 1e-3).all()


def test_lm_text_output_is_readable(tmp_path, capsys):
    """Issue 39: substitutes without <UNK> and punctuation (unless --all-substitutes), reach
    matrices with token labels, layer 0 (context-free: both directions alike) printed once."""
    text = tmp_path / "in.txt"
    text.write_text("He sat on the bank of the river .\n", encoding="utf-8")
    assert cli_main(["lm", str(text), "--reach", "--device", "cpu"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = out[3:12]
    subs = [w for r in rows for w in r.split("  ")[-1].split(", ")]
    assert len(rows) == 9 and rows[4].split()[0] == "bank" and subs
    assert "<UNK>" not in subs and all(any(c.isalnum() for c in w) for w in subs)
    titles = [ln for ln in out if ln.startswith("  reach, layer")]
    assert [t.split(":")[0] for t in titles] == [
        "  reach, layer 0 both directions (context-free)", "  reach, layer 1 forward",
        "  reach, layer 1 backward", "  reach, layer 2 forward", "  reach, layer 2 backward"]
    k = out.index(titles[1])
    assert out[k + 1].split() == ["He", "sat", "on", "the", "bank", "of", "the", "river", "."]
    assert out[k + 6].split()[0] == "bank" and len(out[k + 6].split()) == 10
    assert cli_main(["lm", str(text), "--all-substitutes", "--device", "cpu"]) == 0
    everything = capsys.readouterr().out
    assert "<UNK>" in everything                                 # the demo model's favourite


def test_reach_works_without_a_softmax_and_predictions_say_what_is_missing(tmp_path, capsys):
    text = tmp_path / "in.txt"
    text.write_text("the cat sat .\n", encoding="utf-8")
    code = cli_main(["lm", str(text), "--checkpoint", str(FIXTURE), "--device", "cpu"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and "softmax_weights.hdf5" in err[-1] and "--with-softmax" in err[-1]
    code = cli_main(["lm", str(text), "--checkpoint", str(FIXTURE), "--device", "cpu",
                     "--reach", "--no-predictions", "--json"])
    doc = json.loads(capsys.readouterr().out)["sentences"][0]
    assert code == 0 and "forward" not in doc and np.array(doc["reach"]).shape == (3, 2, 4, 4)


def test_reach_curve_falls_to_zero_on_the_blind_side(demo):
    emb, _ = demo
    curve = reach_curve(emb, [["the", "cat", "sat", "on", "the", "mat", "."],
                              ["a", "dog", "ran", "home", "."]], max_offset=3)
    off = np.array(curve.offsets)
    assert curve.mean.shape == (3, 2, 7) and curve.pairs[off == 0][0] == 12
    assert np.abs(curve.mean[:, 0, off > 0]).max() <= 1e-6
    assert np.abs(curve.mean[:, 1, off < 0]).max() <= 1e-6
    assert (curve.mean[1:, 0, (off < 0)] > 0).all() and (curve.mean[1:, 1, (off > 0)] > 0).all()


def test_lm_reach_curve_command(tmp_path, capsys):
    text = tmp_path / "in.txt"
    text.write_text("the cat sat on the mat .\na dog ran home .\n", encoding="utf-8")
    code = cli_main(["lm", str(text), "--reach-curve", "2", "--json", "--device", "cpu"])
    doc = json.loads(capsys.readouterr().out)
    mean = np.array(doc["mean"])
    assert code == 0 and doc["offsets"] == [-2, -1, 0, 1, 2] and mean.shape == (3, 2, 5)
    assert doc["sentences"] == 2 and doc["pairs"][2] == 12
    assert np.abs(mean[:, 0, 3:]).max() <= 1e-6 and np.abs(mean[:, 1, :2]).max() <= 1e-6


def test_minimal_pairs_score_and_count(demo, tmp_path, capsys):
    emb, soft = demo
    tsv = tmp_path / "p.tsv"
    tsv.write_text("set\tgood\tbad\n"
                   "agr\tThe keys are here .\tThe keys is here .\n"
                   "agr\tThe key is here .\tThe key are here .\n"
                   "det\tThese books are old .\tThis books are old .\n", encoding="utf-8")
    pairs = read_pairs(tsv)
    scores = score_pairs(emb, soft, pairs)
    for s in scores:
        # the per-prediction differences add up to the sentence's difference, per direction
        for d, diffs in ((0, s.forward_diff), (1, s.backward_diff)):
            good, bad = s.log_prob[d]
            assert sum(diffs) == pytest.approx(good - bad, abs=1e-6)
        # the forward LM cannot see the change before it happens (position 2 is the verb)
        where = [k for k, (a, b) in enumerate(zip(s.pair.good, s.pair.bad)) if a != b][0]
        assert all(abs(v) < 1e-9 for v in s.forward_diff[:where])
        assert all(abs(v) < 1e-9 for v in s.backward_diff[where + 2:])
        assert s.log_prob[2][0] == pytest.approx(s.log_prob[0][0] + s.log_prob[1][0])
    table = accuracy_by_set(scores)
    assert [(a.set, a.pairs) for a in table] == [("agr", 2), ("det", 1)]
    want = sum(s.correct(0) for s in scores[:2]) / 2
    assert table[0].accuracy[0] == want
    code = cli_main(["lm", "--pairs", str(tsv), "--json", "--device", "cpu"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["sets"][0]["forward"] == want and len(doc["pairs"]) == 3
    tsv.write_text("set\tgood\tbad\nx\ta b c\ta b\n", encoding="utf-8")
    with pytest.raises(InputError, match=":2: the two sentences differ in length"):
        read_pairs(tsv)


def test_pairs_and_vocabularies_with_a_byte_order_mark_or_unicode_line_breaks(tmp_path):
    """A fourth attack pass: a pairs file saved with a BOM was refused ("the first line must be
    the header"), a U+2028 inside a sentence split the pair and moved the line numbers after
    it, and a vocabulary with a BOM listed '\\ufeffbank' as a word of its own."""
    from elmo_engine.analysis.characters.word_lab import read_vocabulary

    tsv = tmp_path / "bom.tsv"
    tsv.write_bytes("\ufeffset\tgood\tbad\r\nagr\tThe keys are here\tThe keys is here\r\n"
                    "agr\tA dog\u2028runs\tA dog\u2028run\r\nagr\ta b\ta\r\n".encode("utf-8"))
    with pytest.raises(InputError, match=r"bom\.tsv:4: the two sentences differ in length"):
        read_pairs(tsv)                                   # line 4: U+2028 split nothing
    tsv.write_bytes("\ufeffset\tgood\tbad\r\nagr\tThe keys are here\tThe keys is here\r\n"
                    .encode("utf-8"))
    assert [p.good for p in read_pairs(tsv)] == [("The", "keys", "are", "here")]
    vocab = tmp_path / "vocab.txt"
    vocab.write_bytes("\ufeffbank\r\nriver\r\n".encode("utf-8"))
    assert read_vocabulary(vocab) == ["bank", "river"]


def test_bundled_pair_sets_are_well_formed():
    files = bundled_pairs()
    assert len(files) == 3
    for f in files:
        pairs = read_pairs(f)
        assert 20 <= len(pairs) <= 40 and len({p.set for p in pairs}) == 1
        for p in pairs:
            assert sum(a != b for a, b in zip(p.good, p.bad)) == 1, (f, p.line)
