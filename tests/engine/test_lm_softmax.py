"""The softmax (ours and the published layout) and the LM's predictions: a case computed by
hand, the one-position shift per direction against NumPy, eval-lm on published files."""
from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from elmo_engine.analysis.language_model import predict
from elmo_engine.cli import main as cli_main
from elmo_engine.embed.embedder import Embedder
from elmo_engine.errors import CheckpointError
from elmo_engine.model.checkpoint import load_checkpoint
from elmo_engine.model.chars import char_ids_for_types
from elmo_engine.model.softmax import Softmax, load_softmax, save_published_softmax
from elmo_engine.model.softmax_scan import scan

FIXTURE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "elmo" / "allennlp"
WORDS = ["the", "a", "cat", "dog", "sat", "on", "mat", "ran", "to", "house", "."]
SENT = ["the", "cat", "sat", "on", "the", "zebra", "."]          # "zebra": outside the vocab


def test_scan_equals_a_case_computed_by_hand():
    # W rows · h plus b: row 0 logits [ln3, ln2, ln6, ln2] → exp [3, 2, 6, 2], Z = 13;
    # row 1 logits [0, ln2, ln2, ln2] → exp [1, 2, 2, 2], Z = 7; their product [3, 4, 12, 4], 23
    w = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]])
    b = torch.tensor([0.0, 0.0, 0.0, math.log(2)])
    soft = Softmax(w, b, ["<S>", "</S>", "<UNK>", "x"])
    h = torch.tensor([[math.log(3), math.log(2)], [0.0, math.log(2)]])
    res = scan(soft, h, torch.tensor([0, 1]), k=2, pairs=(0, 1, 1), chunk=3)
    assert res.log_z.tolist() == pytest.approx([math.log(13), math.log(7)], abs=1e-6)
    assert torch.exp(res.log_prob).tolist() == pytest.approx([3 / 13, 2 / 7], abs=1e-6)
    assert res.rank.tolist() == [2, 1]          # row 0: only id 2 (6) beats 3; row 1: a tie
    p0 = np.array([3, 2, 6, 2]) / 13
    assert float(res.entropy[0]) == pytest.approx(float(-(p0 * np.log(p0)).sum()), abs=1e-6)
    assert res.top_ids[0].tolist() == [2, 0]
    assert float(res.pair_log_z[0]) == pytest.approx(math.log(23), abs=1e-6)
    assert int(res.pair_top_ids[0, 0]) == 2
    assert math.exp(float(res.pair_top_scores[0, 0] - res.pair_log_z[0])) == pytest.approx(
        12 / 23, abs=1e-6)


@pytest.mark.parametrize("gemm_words", [7, 64, 5000])
def test_scan_in_cache_sized_gemms_equals_numpy(monkeypatch, gemm_words):
    # a block's logits made in sub-blocks of gemm_words (uneven ends included) are the dense ones
    import elmo_engine.model.softmax_scan as ss

    monkeypatch.setattr(ss, "GEMM_WORDS", gemm_words)
    rng = np.random.default_rng(5)
    v, p, r = 1000, 8, 6
    w = rng.normal(0, 1, (v, p)).astype(np.float32)
    b = rng.normal(0, 0.3, v).astype(np.float32)
    h = rng.normal(0, 1, (r, p)).astype(np.float32)
    t = rng.integers(0, v, r)
    names = ["<S>", "</S>", "<UNK>"] + [f"w{i}" for i in range(3, v)]
    soft = Softmax(torch.from_numpy(w).half(), torch.from_numpy(b), names)
    res = ss.scan(soft, torch.from_numpy(h), torch.from_numpy(t), k=5, pairs=(0, 3, 3), chunk=300)
    logits = h.astype(np.float64) @ w.astype(np.float16).astype(np.float64).T + b   # (R, V)
    log_z = np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1)) + logits.max(1)
    assert res.log_z.numpy() == pytest.approx(log_z, abs=1e-4)
    tl = logits[np.arange(r), t]
    assert res.rank.tolist() == [1 + int((logits[i] > tl[i]).sum()) for i in range(r)]
    assert res.top_ids.tolist() == np.argsort(-logits, 1)[:, :5].tolist()
    pair = logits[:3] + logits[3:]
    assert res.pair_top_ids.tolist() == np.argsort(-pair, 1)[:, :5].tolist()


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """The allennlp test model with a test-written softmax in the published layout."""
    folder = tmp_path_factory.mktemp("pub") / "model"
    shutil.copytree(FIXTURE, folder)
    tokens = ["</S>", "<S>", "<UNK>"] + WORDS
    rng = np.random.default_rng(3)
    w = rng.normal(0, 1.0, (len(tokens), 16)).astype(np.float32)
    b = rng.normal(0, 0.5, len(tokens)).astype(np.float32)
    save_published_softmax(folder / "elmo_test_softmax_weights.hdf5", w, b, tokens,
                           folder / "vocab-test.txt")
    return folder, w, b, tokens


def test_published_softmax_is_found_and_read(published):
    folder, w, b, tokens = published
    soft = load_softmax(folder, output_dim=16)
    assert soft.files.layout == "published" and soft.files.vocab.name == "vocab-test.txt"
    assert soft.w.dtype == torch.float32 and np.array_equal(soft.w.numpy(), w)
    assert soft.tokens == tokens and soft.unk == 2 and soft.bos == 1 and soft.eos == 0
    # the weights are still found beside the softmax file
    assert load_checkpoint(folder).info.weights_path.endswith("lm_weights.hdf5")


def test_prob_and_rank_equal_numpy_from_the_top_layer(published):
    folder, w, b, tokens = published
    model = load_checkpoint(folder)
    soft = load_softmax(folder, output_dim=16)
    got = predict(Embedder(model, device="cpu"), soft, [SENT], top_k=3)[0]
    # the top layer through the model's plain forward pass (boundaries kept), independently
    framed = ["<S>", *SENT, "</S>"]
    ids = torch.from_numpy(char_ids_for_types(framed, 50))[None]
    with torch.no_grad():
        layers, _, _ = model(ids)
    top = layers[-1, 0].numpy().astype(np.float64)                     # (T, 32)
    fwd, bwd = top[:, :16], top[:, 16:]
    logits_f = fwd @ w.T.astype(np.float64) + b                        # (T, V)
    logits_b = bwd @ w.T.astype(np.float64) + b
    index = {t: i for i, t in enumerate(tokens)}
    for i, word in enumerate(SENT):
        y = index.get(word, 2)
        t = i + 1                                                      # framed position
        for rec, row in ((got.forward[i], logits_f[t - 1]), (got.backward[i], logits_b[t + 1])):
            lp = row - np.log(np.exp(row - row.max()).sum()) - row.max()
            assert rec.prob == pytest.approx(math.exp(lp[y]), abs=1e-5)
            assert rec.rank == 1 + int((row > row[y]).sum())
            assert rec.surprisal == pytest.approx(-lp[y] / math.log(2), abs=1e-4)
            assert rec.top[0].word == tokens[int(row.argmax())]
    assert got.forward[5].word == "zebra" and not got.forward[5].in_vocabulary
    # perplexity: n+1 predictions per direction, the end marker included
    lp_end = logits_f[len(SENT)] - np.log(np.exp(logits_f[len(SENT)]).sum())
    logps = [math.log(r.prob) for r in got.forward] + [float(lp_end[0])]
    assert got.perplexity[0] == pytest.approx(math.exp(-np.mean(logps)), rel=1e-5)
    # substitutes: p_fwd · p_bwd renormalised
    i = 2
    pf = np.exp(logits_f[i] - logits_f[i].max())
    pf /= pf.sum()
    pb = np.exp(logits_b[i + 2] - logits_b[i + 2].max())
    pb /= pb.sum()
    prod = pf * pb / (pf * pb).sum()
    assert got.substitutes[i][0].word == tokens[int(prod.argmax())]
    assert got.substitutes[i][0].prob == pytest.approx(float(prod.max()), abs=1e-5)


def test_eval_lm_on_a_published_checkpoint_with_its_softmax(published, tmp_path, capsys):
    folder, *_ = published
    text = tmp_path / "t.txt"
    text.write_text("the cat sat on the mat .\nthe dog ran to the house .\n" * 6)
    code = cli_main(["eval-lm", str(text), "--checkpoint", str(folder), "--json", "--no-progress",
                     "--batch-size", "2", "--unroll", "4", "--device", "cpu"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["vocab_size"] == 14
    assert doc["mean"] == pytest.approx((doc["fwd"] + doc["bwd"]) / 2)
    # the chunked scan equals the dense full softmax of the trainer's model
    from elmo_engine.train.data import TypeTable, frame
    from elmo_engine.io.datasets.corpus_text import read_sentences
    from elmo_engine.train.model import BiLanguageModel
    from elmo_engine.train.trainer import perplexity

    folder_, w, b, tokens = published
    bilm = load_checkpoint(folder)
    dense = BiLanguageModel(bilm.opts, len(tokens), fused=False)
    dense.bilm = bilm
    with torch.no_grad():
        dense.softmax_w.copy_(torch.from_numpy(w))
        dense.softmax_b.copy_(torch.from_numpy(b))
    table = TypeTable(50)
    framed = frame(table, read_sentences(text, "tokenize", True, True, "text"))
    soft = load_softmax(folder)
    want = perplexity(dense, framed, torch.from_numpy(table.char_ids()),
                      torch.from_numpy(table.vocab_ids(soft)), 2, 4, torch.device("cpu"))
    for k in ("fwd", "bwd", "mean"):
        assert doc[k] == pytest.approx(want[k], rel=1e-5), k
    # without the softmax file: one line naming what is missing and how to get it
    bare = tmp_path / "bare"
    shutil.copytree(FIXTURE, bare)
    code = cli_main(["eval-lm", str(text), "--checkpoint", str(bare), "--no-progress", "--device", "cpu"])
    err = capsys.readouterr().err.strip()
    assert code == 1 and "\n" not in err
    assert "softmax_weights.hdf5" in err and "models get" in err and "--with-softmax" in err


def test_a_published_softmax_with_links_or_extra_data_is_refused(published, tmp_path):
    folder, w, b, tokens = published
    bad = tmp_path / "bad"
    shutil.copytree(folder, bad)
    path = bad / "elmo_test_softmax_weights.hdf5"
    with h5py.File(path, "a") as fh:
        fh["softmax/extra"] = np.zeros(3, np.float32)
    with pytest.raises(CheckpointError, match="does not describe"):
        load_softmax(bad)
    with h5py.File(path, "a") as fh:
        del fh["softmax/extra"]
        del fh["softmax/b"]
        fh["softmax/b"] = h5py.SoftLink("/softmax/W")
    with pytest.raises(CheckpointError, match="soft link"):
        load_softmax(bad)
    save_published_softmax(path, w[:5], b[:5], tokens[:5])
    with pytest.raises(CheckpointError, match="does not match its vocabulary|cannot tell"):
        load_softmax(bad)
    with pytest.raises(CheckpointError, match="top layer"):
        load_softmax(folder, output_dim=32)
