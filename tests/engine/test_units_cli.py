"""``elmo-explorer units rank|top|ablate`` (issue 40): the documents they print and their errors."""
from __future__ import annotations

import json

import pytest

from support import FIXTURES
from elmo_engine.cli.main import main

pytestmark = pytest.mark.usefixtures("torch_one_thread")

TINY = str(FIXTURES / "allennlp")
CK = ["--checkpoint", TINY, "--device", "cpu"]
SENTENCES = ["He sat on the bank of the river .", "She went to the bank .",
             "The Bank lends money to the Firm .", "They walked along the river bank ."]


@pytest.fixture
def files(tmp_path):
    text = tmp_path / "in.txt"
    text.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    labelled = tmp_path / "labelled.tsv"
    labelled.write_text("\n\n".join("\n".join(f"{w}\t{'Cap' if w[0].isupper() else 'low'}"
                                              for w in s.split()) for s in SENTENCES * 4)
                        + "\n", encoding="utf-8")
    return text, labelled


def run_json(argv, capsys):
    assert main(argv + ["--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_rank_document(files, capsys):
    _, labelled = files
    doc = run_json(["units", "rank", "--tsv", str(labelled), "--states", "c,f", "--layer", "1",
                    "--direction", "backward", "--k", "1,2", "--seeds", "2", "--show", "4", *CK],
                   capsys)
    assert doc["classes"] == ["Cap", "low"] and doc["tokens"] == 4 * sum(len(s.split()) for s in SENTENCES)
    keys = [(r["layer"], r["direction"], r["state"]) for r in doc["rankings"]]
    assert keys == [(1, "backward", "c"), (1, "backward", "f")]
    r = doc["rankings"][0]
    assert set(r["top_units"]) == {"elastic-net", "mean-diff"}
    assert all(len(u) == 4 and len(set(u)) == 4 for u in r["top_units"].values())
    scores = r["top_scores"]["mean-diff"]
    assert scores == sorted(scores, reverse=True)
    assert [(p["k"], p["method"]) for p in r["curve"]] == [
        (1, "elastic-net"), (1, "mean-diff"), (2, "elastic-net"), (2, "mean-diff")]
    assert all(len(p["random"]) == 2 and 0 <= p["top"] <= 1 for p in r["curve"])


def test_top_lists_positions_in_order(files, capsys):
    text, _ = files
    doc = run_json(["units", "top", str(text), "--unit", "7", "--state", "m", "--show", "5",
                    "--direction", "backward", *CK], capsys)
    values = [e["value"] for e in doc["top"]]
    assert len(values) == 5 and values == sorted(values, reverse=True)
    assert doc["positions"] == sum(len(s.split()) for s in SENTENCES)
    low = run_json(["units", "top", str(text), "--unit", "7", "--state", "m", "--show", "5",
                    "--direction", "backward", "--lowest", *CK], capsys)
    assert low["top"][0]["value"] < values[-1]
    assert low["top"][0]["word"] in " ".join(SENTENCES).split()


def test_top_reads_conllu_and_says_when_it_reads_the_first_words_only(tmp_path, capsys,
                                                                       monkeypatch):
    from elmo_engine.analysis.units import corpus as units_corpus

    conllu = tmp_path / "c.conllu"
    conllu.write_text("".join(
        f"# sent_id = {k}\n" + "".join(f"{i}\t{w}\t_\tX\t_\t_\t0\tdep\t_\t_\n"
                                       for i, w in enumerate(s.split(), 1)) + "\n"
        for k, s in enumerate(SENTENCES)), encoding="utf-8")
    doc = run_json(["units", "top", str(conllu), "--unit", "3", *CK], capsys)
    assert doc["positions"] == sum(len(s.split()) for s in SENTENCES)
    monkeypatch.setattr(units_corpus, "CORPUS_TOKENS", 10)
    assert main(["units", "top", str(conllu), "--unit", "3", "--json", *CK]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["positions"] == 15            # whole sentences: 9 + 6 >= 10
    assert "note: read c.conllu (the first 15 words)" in out.err


@pytest.mark.parametrize("argv, message", [
    (["units", "top", "{text}", "--unit", "999", *CK], "--unit 999"),
    (["units", "top", "{text}", "--unit", "1", "--state", "x", *CK], "unknown state"),
    (["units", "top", "{text}", "--unit", "1", "--layer", "5", *CK], "--layer 5"),
    (["units", "rank", *CK], "exactly one of --conllu"),
    (["units", "rank", "--tsv", "{labelled}", "--k", "a", *CK], "--k must be"),
    (["units", "ablate", "--tsv", "{labelled}", "--state", "f", "--device", "cpu"], "c, m or h"),
    (["units", "rank", "--tsv", "{labelled}", "--max-tokens", "3", "--k", "1", *CK],
     "the first labelled sentence holds 9 labelled words, more than the 3 asked"),
    (["units", "rank", "--tsv", "{labelled}", "--max-tokens", "9", "--k", "1", *CK],
     "at least two labelled sentences"),
    (["units", "rank", "--tsv", "{long}", "--k", "1", *CK], "long.tsv:3: a sentence of 10,001"),
    (["units", "rank", "--conllu", "{long_conllu}", "--k", "1", *CK],
     "long.conllu:1: a sentence of 10,001"),
    (["units", "ablate", "--demo", "pos", "--probe-layer", "9", "--device", "cpu"],
     "--probe-layer 9: the model has representation layers 0 … 2"),
    (["units", "ablate", "--demo", "pos", "--contexts", "{text}", "--device", "cpu"],
     "give --word too"),
    (["units", "rank", "--tsv", "{one_class}", "--k", "1", *CK],
     "one_class.tsv: one class among the labelled words read (x)"),
    # a fourth attack pass: a k over the units ran, unchecked (ablate's random control was the
    # complement of the top k, or nothing at all; rank drew no curve, silently)
    (["units", "rank", "--tsv", "{labelled}", "--k", "99999", *CK],
     "--k 99999: the states asked for have at most"),
    (["units", "ablate", "--demo", "pos", "--k", "2,99999", "--device", "cpu"],
     "--k 99999: layer 1's c has"),
])
def test_bad_input_is_one_line(files, tmp_path, capsys, argv, message):
    """Bad input is one line, before the model runs: the labelled readers bound a sentence at
    the tokenizer's 10,000 words as ``units top`` does (a 100,000-word TSV sentence took 62 s
    and 2.8 GB before a refusal), and the two sentences a ranking needs are checked first."""
    text, labelled = files
    long = tmp_path / "long.tsv"
    long.write_text("a\tx\n\n" + "w\tx\n" * 10_001, encoding="utf-8")
    long_conllu = tmp_path / "long.conllu"
    long_conllu.write_text("".join(f"{i}\tw\tw\tX\t_\t_\t0\troot\t_\t_\n"
                                   for i in range(1, 10_002)) + "\n", encoding="utf-8")
    one_class = tmp_path / "one_class.tsv"
    one_class.write_text("a\tx\nb\tx\n\nc\tx\n", encoding="utf-8")
    argv = [a.format(text=text, labelled=labelled, long=long, long_conllu=long_conllu,
                     one_class=one_class) for a in argv]
    assert main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_ablate_without_labelled_tokens_reads_ewt_else_the_demo_task(capsys, monkeypatch):
    from support import REPO
    from elmo_engine.analysis.units import ablate as mod

    pairs = ["--pairs", str(REPO / "resources" / "minimal_pairs" / "agreement_attractors.tsv")]
    args = ["units", "ablate", "--max-tokens", "300", "--k", "1", "--seeds", "1", *pairs,
            "--device", "cpu"]                          # the bundled model: it has a softmax
    if mod.default_ewt_train() is not None:
        doc = run_json(args, capsys)
        assert set(doc["classes"]) <= {"Sing", "Plur", "Ptan"} and 250 <= doc["tokens"] <= 300
    monkeypatch.setattr(mod, "default_ewt_train", lambda: None)
    doc = run_json(args, capsys)
    assert "NOUN" in doc["classes"] and "VERB" in doc["classes"] and doc["pairs"] == 30


def test_pattern_document_and_errors(files, tmp_path, capsys):
    text, _ = files
    conllu = tmp_path / "c.conllu"
    rows = []
    for s in SENTENCES:
        for k, w in enumerate(s.split(), 1):
            rows.append(f"{k}\t{w}\t_\t{'PUNCT' if w == '.' else 'X'}\t_\t_\t0\tdep\t_\t_")
        rows.append("")
    conllu.write_text("\n".join(rows) + "\n", encoding="utf-8")
    args = ["units", "pattern", "--sentence", "She went to the bank .", "--span", "4:5",
            "--threshold", "-5", "--state", "h", "--layer", "1", "--direction", "bwd",
            "--show", "3", *CK]
    doc = run_json(args[:2] + [str(text)] + args[2:], capsys)
    assert doc["words"] == ["the", "bank"] and doc["direction"] == "backward"
    assert doc["spans"] == sum(len(s.split()) - 1 for s in SENTENCES)
    assert len(doc["on_units"]) > 0 and len(doc["matches"]) == 3
    scores = [m["score"] for m in doc["matches"]]
    assert scores == sorted(scores, reverse=True) and doc["matches"][0]["pos"] is None
    # the query's own span is in the corpus: a threshold below every value turns every unit
    # on everywhere, so every span scores 1 and the first wins
    assert scores[0] == 1.0 and doc["matches"][0]["sentence"] == 0
    doc = run_json(args[:2] + [str(conllu)] + args[2:], capsys)
    assert len(doc["matches"][0]["pos"]) == 2
    assert set(doc["matches"][0]["pos"]) <= {"X", "PUNCT"}
    for bad, says in ((["--span", "5"], "--span must be I:J"),
                      (["--span", "6:9"], "--span 6:9"),
                      (["--threshold", "50"], "lower the threshold")):
        argv = ["units", "pattern", str(text), "--sentence", "She went to the bank .",
                "--span", "4:5", *CK] + bad
        assert main(argv) == 1
        assert says in capsys.readouterr().err
    # without --layer: the top layer, as the view's Pattern tab starts (it was 0 here, 1 there)
    doc = run_json(args[:2] + [str(text)] + [a for a in args[2:] if a != "--layer"
                                              and a != "1"], capsys)
    assert doc["layer"] == 1


def test_rank_figure_and_conllu_feats(files, tmp_path, capsys):
    """``--figure`` draws the curves (refused over an existing file without --force); a
    CoNLL-U file's FEATS feature is the label, as the Probes view reads it."""
    conllu = tmp_path / "n.conllu"
    lines = []
    for s in SENTENCES * 3:
        for i, w in enumerate(s.split(), 1):
            feats = "Number=Plur" if w.endswith("s") else ("Number=Sing" if w.isalpha() else "_")
            lines.append(f"{i}\t{w}\t{w}\tX\t_\t{feats}\t0\troot\t_\t_")
        lines.append("")
    conllu.write_text("\n".join(lines) + "\n", encoding="utf-8")
    fig = tmp_path / "curve.svg"
    doc = run_json(["units", "rank", "--conllu", str(conllu), "--label", "feats:Number",
                    "--states", "c", "--layer", "0", "--direction", "forward", "--k", "1,4",
                    "--seeds", "2", "--figure", str(fig), *CK], capsys)
    assert doc["classes"] == ["Plur", "Sing"]
    svg = fig.read_text(encoding="utf-8")
    assert "layer 0 forward c" in svg and "k random (mean ± sd)" in svg
    assert main(["units", "rank", "--conllu", str(conllu), "--label", "feats:Number",
                 "--figure", str(fig), *CK]) == 1
    assert "exists; pass --force" in capsys.readouterr().err


def test_ablate_remeasures_a_probe_and_a_words_similarity(capsys):
    """``--probe-layer`` and ``--word``: with nothing ablated the numbers are the measures'
    own; every ablation gives one number per seed."""
    from support import REPO

    pairs = ["--pairs", str(REPO / "resources" / "minimal_pairs" / "agreement_attractors.tsv")]
    doc = run_json(["units", "ablate", "--demo", "pos", "--max-tokens", "300", "--k", "2",
                    "--seeds", "2", *pairs, "--probe-layer", "2", "--word", "the",
                    "--device", "cpu"], capsys)
    probe, sim = (doc["measures"][k] for k in ("probe accuracy (layer 2)",
                                               "similarity of 'the' across contexts (layer 2)"))
    assert 0.3 < probe["none"] <= 1.0 and 0.0 < sim["none"] < 1.0
    row = probe["ablated"][0]
    assert row["k"] == 2 and len(row["random"]) == 2
    assert row["random_mean"] == pytest.approx(sum(row["random"]) / 2)


def test_ablate_takes_the_default_ks_a_narrow_model_allows(tmp_path, capsys):
    """An attack pass: on a model of 24 cells, ``units ablate`` (and the app's Number units)
    with no ``--k`` failed on the default 16 ("--k 16: … at most 12", an option never typed);
    the defaults that fit are taken, and said. A k asked for over it is still refused."""
    import numpy as np

    from support import REPO, write_tiny_checkpoint
    from elmo_engine.analysis.units.sizes import DEFAULT_KS, fitting_ks
    from elmo_engine.model.softmax import save_published_softmax

    assert fitting_ks(DEFAULT_KS, 24) == (1, 2, 4, 8) and fitting_ks(DEFAULT_KS, 1) == ()
    write_tiny_checkpoint(tmp_path / "narrow", lstm_dim=24)
    words = ["</S>", "<S>", "<UNK>", "the", "keys", "key", "is", "are", "."]
    rng = np.random.default_rng(0)
    save_published_softmax(tmp_path / "narrow" / "tiny_softmax_weights.hdf5",
                           rng.normal(0, 1, (len(words), 16)).astype(np.float32),
                           np.zeros(len(words), np.float32), words,
                           tmp_path / "narrow" / "vocab-tiny.txt")
    pairs = ["--pairs", str(REPO / "resources" / "minimal_pairs" / "agreement_attractors.tsv")]
    base = ["units", "ablate", "--demo", "pos", "--max-tokens", "200", "--seeds", "1",
            "--checkpoint", str(tmp_path / "narrow"), "--device", "cpu", *pairs]
    assert main(base + ["--json"]) == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert [row["k"] for row in doc["ablated"]] == [1, 2, 4, 8]
    assert "k = 1, 2, 4, 8: layer 1's c has 24 units, and k is at most half" in captured.err
    assert main(base + ["--k", "16"]) == 1
    assert "--k 16: layer 1's c has 24 units" in capsys.readouterr().err
