"""``elmo-explorer layers`` on tiny random checkpoints (no ../shared needed) and the shipped
reference corpus."""
from __future__ import annotations

import json
import math
from collections import Counter

import numpy as np
import pytest

from elmo_engine.cli import layers as layers_cli
from elmo_engine.analysis.layers.cka import cka_matrix, cross_cka
from elmo_engine.analysis.layers.contextuality import contextuality
from elmo_engine.analysis.layers.run import reference_corpus_path, subset
from elmo_engine.analysis.layers.sample import read_sample
from elmo_engine.cli import build_parser, main
from elmo_engine.errors import InputError
from support import LAYERS_SENTENCES as SENTENCES, write_tiny_checkpoint


@pytest.fixture(autouse=True, scope="module")
def _one_thread(torch_one_thread):
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        yield


@pytest.fixture
def corpus(tmp_path):
    f = tmp_path / "corpus.txt"
    f.write_text("\n".join(SENTENCES) + "\n\n", encoding="utf-8")      # a blank line is skipped
    return f


@pytest.fixture(scope="module")
def second_checkpoint(tmp_path_factory):
    return write_tiny_checkpoint(tmp_path_factory.mktemp("tiny_b"), seed=1)


def embed(checkpoint, tokens):
    from elmo_engine.model.checkpoint import load_checkpoint
    from elmo_engine.embed.embedder import Embedder

    return Embedder(load_checkpoint(checkpoint), device="cpu").embed(tokens)


def test_registered_with_the_entry_point():
    args = build_parser().parse_args(["layers", "c.txt", "--json", "-o", "o.json", "--compare", "b"])
    assert args.command == "layers" and args.func is layers_cli.run
    assert args.min_count == 5 and args.seed == 0 and args.device == "auto"


def test_layers_json_matches_the_engine(tiny_checkpoint, second_checkpoint, corpus, tmp_path,
                                        capsys):
    out = tmp_path / "layers.json"
    words = tmp_path / "words.csv"
    rc = main(["layers", str(corpus), "--checkpoint", str(tiny_checkpoint), "--compare",
               str(second_checkpoint), "--json", "-o", str(out), "--words-csv", str(words),
               "--min-count", "3", "--pretokenized", "--device", "cpu"])
    assert rc == 0
    printed = capsys.readouterr()
    assert printed.out == ""                       # --json -o FILE: the results in FILE
    assert "embedding corpus" in printed.err                       # progress on stderr
    doc = json.loads(out.read_text(encoding="utf-8"))
    tokens = [s.split() for s in SENTENCES]
    assert doc["corpus"]["sentences"] == 8 and doc["corpus"]["tokens"] == sum(map(len, tokens))
    assert doc["model"]["layers"] == 3 and doc["model"]["dim"] == 32
    acts = embed(tiny_checkpoint, tokens)
    ref = contextuality(acts, tokens, min_count=3)
    ctx = doc["contextuality"]
    assert ctx["words"] == len(ref.words) > 0 and ctx["min_count"] == 3
    assert [list(layer["directions"]) for layer in ctx["layers"]] == [
        ["both"], ["both", "forward", "backward"], ["both", "forward", "backward"]]
    for row in ref.rows:
        got = ctx["layers"][row.layer]["directions"][row.direction]
        for key, m in (("self_similarity", row.self_similarity),
                       ("intra_sentence_similarity", row.intra_sentence_similarity),
                       ("max_explainable_variance", row.max_explainable_variance)):
            assert got[key]["value"] == pytest.approx(m.value, abs=1e-6)
            assert got[key]["baseline"] == pytest.approx(m.baseline, abs=1e-6)
            assert got[key]["adjusted"] == pytest.approx(m.value - m.baseline, abs=1e-6)
    stacked = np.concatenate(acts, axis=1)
    m = np.array(doc["cka"]["matrix"])
    np.testing.assert_allclose(m, m.T, atol=0)
    np.testing.assert_allclose(np.diag(m), 1.0, atol=1e-9)
    np.testing.assert_allclose(m, cka_matrix(stacked), atol=1e-6)
    assert doc["cka"]["estimator"] == "unbiased" and doc["cka"]["tokens"] == stacked.shape[1]
    cross = np.array(doc["compare"]["cka"]["matrix"])
    stacked_b = np.concatenate(embed(second_checkpoint, tokens), axis=1)
    np.testing.assert_allclose(cross, cross_cka(stacked, stacked_b), atol=1e-6)
    assert doc["compare"]["model"]["checksum"] != doc["model"]["checksum"]
    assert doc["mdl"] is None
    header, *rows = words.read_text(encoding="utf-8").splitlines()
    assert header.startswith("word,count,selfsim_l0_both") and len(rows) == len(ref.words)
    assert rows[0].split(",")[:2] == [ref.words[0], str(ref.counts[0])]


def test_existing_output_is_refused_without_force(tiny_checkpoint, corpus, tmp_path, capsys):
    out = tmp_path / "exists.json"
    out.write_text("{}", encoding="utf-8")
    argv = ["layers", str(corpus), "--checkpoint", str(tiny_checkpoint), "--json", "-o", str(out),
            "--min-count", "3", "--device", "cpu"]
    assert main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(out) in err[0] and "--force" in err[0]
    assert out.read_text(encoding="utf-8") == "{}"
    assert main(argv + ["--force"]) == 0
    assert json.loads(out.read_text(encoding="utf-8"))["version"] == 1


@pytest.mark.parametrize("content, where", [
    (b"a fine sentence .\n\xff\xfe broken\n", ":2"),
    (b"\n\n  \n", "no sentences"),
    (b"one\x00two\n", ":1"),
])
def test_bad_corpus_is_one_clear_line(tmp_path, capsys, content, where):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(content)
    assert main(["layers", str(bad), "--device", "cpu"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0]
    assert str(bad) in err[0] and where in err[0]


def test_bad_options(tiny_checkpoint, corpus, capsys):
    assert main(["layers", str(corpus), "--mdl-task", "pos"]) == 1
    assert "--mdl-train" in capsys.readouterr().err
    assert main(["layers", str(corpus), "--min-count", "1"]) == 1
    assert "--min-count must be at least 2" in capsys.readouterr().err
    assert main(["layers", str(corpus / "missing")]) == 1
    assert "missing" in capsys.readouterr().err
    one = corpus.parent / "one.txt"
    one.write_text("one\n", encoding="utf-8")
    assert main(["layers", str(one), "--checkpoint", str(tiny_checkpoint)]) == 1
    assert "one.txt: 1 token(s) to analyse; CKA between layers needs at least 4" in \
        capsys.readouterr().err


def test_a_bad_compare_model_fails_before_the_analysis(tiny_checkpoint, corpus, tmp_path,
                                                       capsys, monkeypatch):
    """Model B is loaded first: a bad --compare is one line at once, not after A's analysis."""
    from elmo_engine.analysis.layers import run as layers_run

    def never(*a, **k):
        raise AssertionError("the analysis ran before --compare was checked")

    monkeypatch.setattr(layers_run, "analyse_layers", never)
    bad = tmp_path / "b"
    bad.mkdir()
    (bad / "options.json").write_text("{", "utf-8")
    assert main(["layers", str(corpus), "--checkpoint", str(tiny_checkpoint), "--compare",
                 str(bad), "--device", "cpu"]) == 1
    err = [ln for ln in capsys.readouterr().err.strip().splitlines()
           if not ln.startswith("note:")]
    assert len(err) == 1 and str(bad) in err[0], err


def test_tokenization_modes(tmp_path):
    f = tmp_path / "typed.txt"
    f.write_text("I don't know.\n", encoding="utf-8")
    assert read_sample(f, pretokenized=False).tokens == [["I", "do", "n't", "know", "."]]
    assert read_sample(f, pretokenized=True).tokens == [["I", "don't", "know."]]


def test_mdl_on_a_tsv_task(tiny_checkpoint, tmp_path, capsys):
    rows = []
    for i in range(40):
        for w, tag in (("the", "DET"), (f"w{i % 7}", "NOUN"), ("ran", "VERB"), (".", "PUNCT")):
            rows.append(f"{w}\t{tag}")
        rows.append("")
    tsv = tmp_path / "task.tsv"
    tsv.write_text("\n".join(rows) + "\n", encoding="utf-8")
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    out = tmp_path / "mdl.json"
    assert main(["layers", str(corpus), "--checkpoint", str(tiny_checkpoint), "--json", "-o",
                 str(out), "--mdl-task", "tsv", "--mdl-train", str(tsv), "--min-count", "3",
                 "--device", "cpu"]) == 0
    assert capsys.readouterr().out == ""
    mdl = json.loads(out.read_text(encoding="utf-8"))["mdl"]
    assert mdl["examples"] == 160 and mdl["classes"] == 4
    assert mdl["uniform_codelength_bits"] == pytest.approx(160 * math.log2(4))
    assert [entry["layer"] for entry in mdl["layers"]] == [0, 1, 2]
    assert mdl["boundaries"][-1] == 160
    for entry in mdl["layers"] + [mdl["mix"]]:
        assert entry["online_codelength_bits"] == pytest.approx(
            sum(entry["block_codelengths_bits"]))
        assert entry["compression"] > 1.0           # the words decide the tags: compressible
    assert sum(mdl["mix"]["weights"]) == pytest.approx(1.0)


def test_shipped_reference_corpus():
    path = reference_corpus_path()
    assert path.is_file() and (path.parent / "README.md").is_file()
    assert (path.parent / "LICENSE-CC-BY-4.0.txt").is_file()
    readme = (path.parent / "README.md").read_text(encoding="utf-8")
    assert "CC BY 4.0" in readme and "public domain" in readme and "OpenStax" in readme
    tokens = read_sample(path).tokens
    assert 2000 <= len(tokens) <= 5000
    counts = Counter(t for s in tokens for t in s)
    assert sum(1 for c in counts.values() if c >= 5) >= 1000


def test_mdl_on_demo_word_senses_codes_each_sense_among_its_lemmas(tiny_checkpoint, corpus,
                                                                   tmp_path):
    out = tmp_path / "wsd.json"
    assert main(["layers", str(corpus), "--checkpoint", str(tiny_checkpoint), "--json", "-o",
                 str(out), "--mdl-task", "demo-wsd", "--mdl-max-sentences", "60", "--min-count", "3",
                 "--device", "cpu"]) == 0
    mdl = json.loads(out.read_text(encoding="utf-8"))["mdl"]
    assert mdl["examples"] == 60 and mdl["task"] == "demo-wsd"
    # candidates are the senses of the word's own lemma, far fewer than all senses in the data
    assert 0 < mdl["uniform_codelength_bits"] < 60 * math.log2(mdl["classes"]) - 1
    assert all(lab.count("%") == 1 for lab in mdl["labels"])


def test_sample_reads_the_file_as_a_stream_and_says_what_it_kept(tmp_path, tiny_checkpoint,
                                                                  capsys):
    """``layers`` analyses a seeded sample of whole sentences up to --max-tokens (the same one
    each run), in file order; a file that fits is taken whole, as every reader of sentence
    files reads it; the command says what it kept and which blank lines it skipped."""
    from elmo_engine.io.datasets.text_input import read_text_input

    lines = [" ".join(f"w{i}x{j}" for j in range(1 + i % 9)) for i in range(400)]
    f = tmp_path / "c.txt"
    f.write_text("\n".join(lines[:200]) + "\n\n" + "\n".join(lines[200:]) + "\n", encoding="utf-8")
    full = read_sample(f)
    whole = full.tokens
    assert full.sentences_in_file == 400 and whole == read_text_input(f).tokens
    assert not full.sampled and full.sample_note() == ""
    assert full.blank_note == f"skipped 1 blank line (line 201) of {f.name}"
    part = read_sample(f, False, None, 500, 3)
    sample = part.tokens
    assert part.sentences_in_file == 400 and 0 < part.n_tokens <= 500 and len(sample) < 400
    assert part.sample_note() == (f"a seeded sample of {len(sample):,} of 400 sentences "
                                  f"({part.n_tokens:,} of {full.n_tokens:,} tokens)")
    order = [whole.index(s) for s in sample]
    assert order == sorted(order)                                 # kept in file order
    assert sample == read_sample(f, False, None, 500, 3).tokens             # seeded
    assert sample != read_sample(f, False, None, 500, 4).tokens
    both = read_sample(f, False, 100, 10 ** 5, 0).tokens          # --max-sentences as before
    assert both == [whole[i] for i in subset(400, 100, 0)]
    with pytest.raises(InputError, match="1 to 100,000 tokens"):
        read_sample(f, max_tokens=10 ** 6)
    from elmo_engine.errors import CancelledError
    from elmo_engine.progress import TaskState

    said = []                                     # progress as it reads, and cancel
    assert read_sample(f, state=TaskState(lambda d, t, m: said.append(m))).tokens == whole
    assert said[0] == "reading c.txt: 0 sentences" and said[-1] == "sampling c.txt: 0 sentences"
    stop = TaskState()
    stop.cancel()
    with pytest.raises(CancelledError):
        read_sample(f, state=stop)
    capsys.readouterr()                                           # the command says both notes
    assert main(["layers", str(f), "--checkpoint", str(tiny_checkpoint), "--device", "cpu",
                 "--max-tokens", "500", "--seed", "3", "-o", str(tmp_path / "l.txt")]) == 0
    err = capsys.readouterr().err
    assert f"note: {full.blank_note}" in err
    assert f"note: analysing {part.sample_note()}; --max-tokens" in err


def test_layers_hubness_matches_the_engine(tiny_checkpoint, corpus, tmp_path, capsys):
    """Issue 42: hubness per layer in the JSON, the tables and the hubs TSV, computed on the
    whole (small) corpus: N_k from exact cosine neighbours of every token."""
    from elmo_engine.analysis.layers.hubness import k_occurrence, skewness

    out, hubs = tmp_path / "layers.json", tmp_path / "hubs.tsv"
    assert main(["layers", str(corpus), "--checkpoint", str(tiny_checkpoint), "--json", "-o",
                 str(out), "--hub-k", "4", "--hubs-tsv", str(hubs), "--pretokenized",
                 "--device", "cpu"]) == 0
    capsys.readouterr()
    h = json.loads(out.read_text(encoding="utf-8"))["hubness"]
    tokens = [s.split() for s in SENTENCES]
    stacked = np.concatenate(embed(tiny_checkpoint, tokens), axis=1)       # (3, N, 32)
    assert (h["k"], h["n"], h["n_total"]) == (4, stacked.shape[1], stacked.shape[1])
    words = [w for s in tokens for w in s]
    for layer in h["layers"]:
        counts = k_occurrence(stacked[layer["layer"]], 4)
        assert layer["skewness"] == pytest.approx(skewness(counts), abs=1e-9)
        assert layer["distribution"] == np.bincount(counts).tolist()
        top = layer["hubs"][0]
        assert top["count"] == counts.max() and top["token"] == words[int(np.argmax(counts))]
        assert f"[{top['token']}]" in top["context"]
    lines = hubs.read_text(encoding="utf-8").splitlines()
    assert lines[0].split("\t")[:6] == ["layer", "skewness", "k", "n", "rank", "token"]
    assert len(lines) == 1 + sum(len(lay["hubs"]) for lay in h["layers"])
    assert main(["layers", str(corpus), "--checkpoint", str(tiny_checkpoint), "--hub-k", "4",
                 "--pretokenized", "--device", "cpu"]) == 0
    assert "hubness (k=4" in capsys.readouterr().out
