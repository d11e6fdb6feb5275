"""``elmo-explorer chars`` (issue 41): the word lab's default action, the atlas's TSV, figure and
search, the perturbation sweep's JSON; on the vendored AllenNLP test model."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from support import FIXTURES
from elmo_engine.cli.main import main

pytestmark = pytest.mark.usefixtures("torch_one_thread")
CK = ["--checkpoint", str(FIXTURES / "allennlp"), "--device", "cpu"]


def _json(argv, capsys) -> dict:
    assert main(argv + ["--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_chars_words_is_chars_word_words(capsys):
    a = _json(["chars", "blorft", "Recieve", "--filters", "3", "--neighbours", "2", *CK], capsys)
    b = _json(["chars", "word", "blorft", "Recieve", "--filters", "3", "--neighbours", "2", *CK],
              capsys)
    assert a == b
    w = a["words"][0]
    assert w["characters"] == "⟨blorft⟩" and w["char_ids"][0] == 259 and w["char_ids"][-1] == 260
    assert len(w["top_filters"]) == 3 and len(w["neighbours"]) == 2
    assert len(w["highway"]) == 2 and 0 <= w["highway"][0]["transform_share"] <= 1
    assert a["vocabulary"]["source"] == "the reference corpus's word types"


def test_a_word_named_like_an_action_and_a_vocabulary_file(tmp_path, capsys):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("<S>\n</S>\n<UNK>\nfilters 12\nfilter\nbank\n", encoding="utf-8")
    doc = _json(["chars", "word", "filters", "--vocab", str(vocab), "--neighbours", "5", *CK],
                capsys)
    assert doc["vocabulary"]["words"] == 3
    assert [n["word"] for n in doc["words"][0]["neighbours"]] != []
    assert "filters" not in [n["word"] for n in doc["words"][0]["neighbours"]]
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok\n\xff\n")
    assert main(["chars", "x", "--vocab", str(bad), *CK]) == 1
    assert capsys.readouterr().err.strip() == (f"elmo-explorer: error: {bad}:2: not valid UTF-8 "
                                               "(byte 0xFF at column 1)")


def test_filters_tsv_figure_and_search(tmp_path, capsys):
    tsv, fig = tmp_path / "atlas.tsv", tmp_path / "map.png"
    doc = _json(["chars", "filters", "--top", "3", "--tsv", str(tsv), "--figure", str(fig), *CK],
                capsys)
    assert len(doc["filters"]) == 4 + 8 + 16 + 32 + 64
    assert all(len(f["ngrams"]) == 3 for f in doc["filters"])
    assert sum(sum(c.values()) for c in doc["categories"].values()) == 124
    lines = tsv.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 125 and lines[1].split("\t")[0] == "0"
    assert fig.read_bytes()[:4] == b"\x89PNG"
    only = _json(["chars", "filters", "--width", "2", "--top", "1", *CK], capsys)
    assert {f["width"] for f in only["filters"]} == {2} and len(only["filters"]) == 8
    found = _json(["chars", "filters", "--search=-ness", "--top", "4", *CK], capsys)
    assert len(found["filters"]) == 4
    assert all(("ness" in f["window"] or f["window"] in "ness⟩") for f in found["filters"])
    assert main(["chars", "filters", "--width", "7", *CK]) == 1
    assert "--width 7: the model's filter widths are 1, 2, 3, 4, 5" in capsys.readouterr().err
    assert main(["chars", "filters", "--figure", str(tmp_path / "map.gif"), *CK]) == 1
    assert ".png, .svg or .pdf" in capsys.readouterr().err


def test_perturb_json_and_a_sentence_file(tmp_path, capsys):
    doc = _json(["chars", "perturb", "--sentence", "the bank of the river .", "--word", "bank",
                 "--per-type", "2", *CK], capsys)
    assert doc["positions"] == [1] and doc["layers"] == [0, 1, 2]
    assert all(len(v["cosine"]) == 3 and len(v["cosine"][0]) == 3 for v in doc["variants"])
    assert "delete 1" in doc["mean_per_type"] and "case" in doc["mean_per_type"]
    again = _json(["chars", "perturb", "--sentence", "the bank of the river .", "--word", "bank",
                   "--per-type", "2", *CK], capsys)
    assert again == doc
    text = tmp_path / "s.txt"
    text.write_text("the bank of the river .\nno match here\na bank lends money .\n", "utf-8")
    fig = tmp_path / "p.svg"
    doc = _json(["chars", "perturb", "--sentences", str(text), "--word", "bank", "--per-type",
                 "1", "--figure", str(fig), *CK], capsys)
    assert doc["sentences"] == ["the bank of the river .", "a bank lends money ."]
    assert fig.read_text(encoding="utf-8").lstrip().startswith("<?xml")
    assert main(["chars", "perturb", "--sentences", str(text), "--word", "Bank", *CK]) == 1
    err = capsys.readouterr().err
    assert "'Bank' does not occur in the 3 sentences" in err and "'bank'" in err


def test_help_lists_the_actions(capsys):
    with pytest.raises(SystemExit) as e:
        main(["chars", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "word" in out and "filters" in out and "perturb" in out
    assert Path.cwd().exists()


def test_perturb_takes_the_views_variants_per_type_by_default(capsys):
    """``chars perturb`` made 6 variants a type, the Perturbations tab and the report 4: other
    means for the same sentence and word. One default now (``perturb.PER_KIND``)."""
    from elmo_engine.analysis.characters import perturb
    from elmo_engine.embed.embedder import Embedder
    from elmo_engine.model.checkpoint import load_checkpoint

    doc = _json(["chars", "perturb", "--sentence", "the bank of the river .", "--word", "bank",
                 *CK], capsys)
    emb = Embedder(load_checkpoint(FIXTURES / "allennlp"), device="cpu", cache_size=0)
    view = perturb.sweep(emb, ["the bank of the river .".split()], "bank").to_dict()
    assert perturb.PER_KIND == 4
    assert len(doc["variants"]) == len(view["variants"])
    assert set(doc["mean_per_type"]) == set(view["mean_per_type"])
    for kind, rows in view["mean_per_type"].items():
        assert np.allclose(doc["mean_per_type"][kind], rows, atol=1e-4), kind


def test_perturb_a_word_list_over_a_sentence_file(tmp_path, capsys):
    text = tmp_path / "s.txt"
    text.write_text("the bank of the river .\nthe river is wide .\na bank lends money .\n",
                    "utf-8")
    doc = _json(["chars", "perturb", "--sentences", str(text), "--word", "bank,river",
                 "--per-type", "1", *CK], capsys)
    assert doc["words"] == ["bank", "river"] and doc["sentences"] == 4
    assert [len(s["sentences"]) for s in doc["sweeps"]] == [2, 2]
    one = _json(["chars", "perturb", "--sentences", str(text), "--word", "bank", "--per-type",
                 "1", *CK], capsys)
    assert one["sentences"] == doc["sweeps"][0]["sentences"]
    assert main(["chars", "perturb", "--sentences", str(text), "--word", "bank,absent",
                 *CK]) == 1
    assert "'absent' does not occur" in capsys.readouterr().err
    for word in (",", "", ",,"):                         # no word at all: one line, no traceback
        assert main(["chars", "perturb", "--sentences", str(text), "--word", word, *CK]) == 1
        err = capsys.readouterr().err
        assert "names no word" in err and "Traceback" not in err and len(err.splitlines()) == 1


def test_nonce_word_in_context_with_a_corpus_index(tmp_path, capsys):
    """The bundled model (it has a softmax): the nonce word is outside the vocabulary, the LMs
    predict words for its slot, and the index gives its nearest occurrences per layer."""
    text = tmp_path / "c.txt"
    text.write_text("He sat on the bank of the river .\nShe went to the bank .\n"
                    "The boat drifted to the far bank of the lake .\n", encoding="utf-8")
    index = tmp_path / "ix"
    assert main(["index", str(text), "-o", str(index), "--device", "cpu"]) == 0
    capsys.readouterr()
    doc = _json(["chars", "nonce", "--sentence", "He sat on the blorft of the river .",
                 "--word", "blorft", "--top-k", "5", "-k", "2", "--index", str(index),
                 "--device", "cpu"], capsys)
    assert doc["word"] == "blorft" and doc["position"] == 4 and not doc["in_vocabulary"]
    assert doc["forward_rank"] is None
    assert len(doc["forward_predictions"]) == 5 and len(doc["backward_predictions"]) == 5
    probs = [p for _, p in doc["forward_predictions"]]
    assert probs == sorted(probs, reverse=True) and 0 < probs[0] <= 1
    assert len(doc["layer0_neighbours"]) == 5 and "blorft" not in dict(doc["layer0_neighbours"])
    layers = doc["index"]["layers"]
    assert layers and all(len(h) == 2 for h in layers.values())
    known = _json(["chars", "nonce", "--sentence", "He sat on the bank of the river .", "--word",
                   "bank", "--top-k", "3", "--device", "cpu"], capsys)
    assert known["in_vocabulary"] and known["forward_rank"] >= 1 and known["index"] is None


def test_nonce_without_a_softmax_still_searches_the_index(tmp_path, capsys):
    """A model without a softmax: ``chars nonce --index`` failed whole, where the view's In
    context tab shows the index's nearest occurrences and says the predictions need one. Now
    the command does the same; without ``--index`` it is still the missing file's line."""
    text = tmp_path / "c.txt"
    text.write_text("He sat on the bank of the river .\nShe went to the bank .\n",
                    encoding="utf-8")
    index = tmp_path / "ix"
    assert main(["index", str(text), "-o", str(index), *CK]) == 0
    capsys.readouterr()
    argv = ["chars", "nonce", "--sentence", "He sat on the blorft of the river .", "--word",
            "blorft", "-k", "2", *CK]
    assert main(argv + ["--index", str(index), "--json"]) == 0
    out = capsys.readouterr()
    doc = json.loads(out.out)
    assert doc["no_predictions"].startswith("no predictions: no softmax")
    assert "forward_predictions" not in doc and doc["position"] == 4
    assert doc["index"]["layers"] and all(len(h) == 2 for h in doc["index"]["layers"].values())
    assert "the nearest occurrences in --index are shown" in out.err
    assert main(argv) == 1
    assert "no softmax" in capsys.readouterr().err
