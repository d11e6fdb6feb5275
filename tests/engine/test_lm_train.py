"""biLM training: data windows, sampled vs full softmax, learning, export → load round trip."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from elmo_engine.model.chars import batch_to_ids
from elmo_engine.model.checkpoint import load_checkpoint
from elmo_engine.train import state_io
from elmo_engine.train.data import Streams, TypeTable, frame
from elmo_engine.io.datasets.corpus_text import read_sentences, split_sentences
from elmo_engine.train.model import BiLanguageModel, LogUniformSampler
from elmo_engine.train.trainer import TrainConfig, train
from elmo_engine.train.vocab import Vocabulary

import lm_train_helpers as helpers

from support import FIXTURES

BILM_TF_DATA = FIXTURES / "bilm-tf" / "train" / "data.txt"


def tiny_config(**kw) -> TrainConfig:
    """The shared tiny configuration with batches of 2 (these tests' small corpora)."""
    return helpers.tiny_config(**{"batch_size": 2, **kw})


@pytest.fixture(scope="module")
def fixture_corpus() -> Path:
    return BILM_TF_DATA


def test_split_sentences_and_headers(tmp_path):
    toks = "He said “ Go . ” Then he left . the U.S. grew ! Why ?".split()
    assert split_sentences(toks) == [["He", "said", "“", "Go", ".", "”"], ["Then", "he", "left", ".",
                                     "the", "U.S.", "grew", "!"], ["Why", "?"]]
    f = tmp_path / "c.txt"
    f.write_text("= book :: m1 :: Intro =\nThe bank lends money. It pays interest.\n\n", "utf-8")
    assert read_sentences(f) == [["The", "bank", "lends", "money", "."],
                                 ["It", "pays", "interest", "."]]
    assert read_sentences(f, skip_headers=False, sentences=False)[0][:2] == ["=", "book"]


def test_streams_forward_and_backward_targets():
    table = TypeTable()
    framed = frame(table, [["a", "b"], ["c", "d", "e"], ["f"]])       # 4 + 5 + 3 = 12 tokens
    st = Streams(framed, batch_size=2, unroll=2)                        # rows of 6
    assert st.rows.shape == (2, 6) and st.n_windows == 2
    w0, w1 = st.window(0), st.window(1)
    names = np.array(table.types)
    # forward row 0 reads <S> a b </S> <S> c; each target is the next token
    assert names[w0.inputs[0, 0]].tolist() == ["<S>", "a"]
    assert names[w0.targets[0, 0]].tolist() == ["a", "b"]
    assert names[w1.inputs[0, 0]].tolist() == ["b", "</S>"]
    # backward row 0 reads the same row reversed: c <S> </S> b a <S>
    assert names[w0.inputs[1, 0]].tolist() == ["c", "<S>"]
    assert names[w0.targets[1, 0]].tolist() == ["<S>", "</S>"]
    assert names[w1.inputs[1, 0]].tolist() == ["</S>", "b"]
    assert names[w1.targets[1, 0]].tolist() == ["b", "a"]


def test_sampled_softmax_with_every_word_equals_full_softmax():
    cfg = tiny_config()
    opts = cfg.bilm_options()
    model = BiLanguageModel(opts, 50)
    model.reset_parameters(torch.Generator().manual_seed(1))
    g = torch.Generator().manual_seed(2)
    chars = torch.from_numpy(batch_to_ids([[f"w{i}" for i in range(30)]])[0])      # (32, 50)
    inputs = torch.randint(0, 32, (2, 3, 4), generator=g)
    targets = torch.randint(0, 50, (2, 3, 4), generator=g)
    state = model.bilm.lstm.zero_state(3)
    every = torch.arange(50)
    zero = torch.zeros(50)
    sampled, _ = model(chars, inputs, targets, state, every, zero, torch.zeros(2, 3, 4))
    full, _ = model.full_nll(chars, inputs, targets, state)
    assert torch.allclose(sampled * 12, full, atol=1e-5)


def test_log_uniform_sampler():
    s = LogUniformSampler(1000, 64)
    ids = s.sample(torch.Generator().manual_seed(0))
    assert ids.unique().numel() == ids.numel() and 0 <= int(ids.min()) and int(ids.max()) < 1000
    q = s.log_expected.exp()
    assert 0 < float(q[-1]) < float(q[0]) <= 1.0
    # frequent (low) ids are drawn far more often than rare ones
    draws = torch.cat([s.sample(torch.Generator().manual_seed(i)) for i in range(50)])
    assert (draws < 10).sum() > (draws >= 990).sum() * 5


def test_perplexity_falls_and_export_round_trip(fixture_corpus, tmp_path):
    cfg = tiny_config(epochs=100)
    before = train(fixture_corpus, fixture_corpus, tmp_path / "a", tiny_config(epochs=100, max_steps=0),
                   device="cpu", show_progress=False, log=lambda m: None)
    res = train(fixture_corpus, fixture_corpus, tmp_path / "b", tiny_config(epochs=100, max_steps=40),
                device="cpu", show_progress=False, log=lambda m: None)
    assert before.steps == 0 and res.steps == 40 and res.stopped == "max_steps"
    for d in ("fwd", "bwd", "mean"):
        assert res.dev[d] < 0.8 * before.dev[d], (d, before.dev, res.dev)
    curve = np.array(res.history["train"])                          # (40, 3): step, fwd, bwd
    assert curve.shape == (40, 3)
    assert (curve[-5:, 1:].mean(0) < curve[:5, 1:].mean(0) - 0.15).all()

    # export → load_checkpoint gives the trained biLM's activations exactly
    out = tmp_path / "b"
    assert (out / "options.json").is_file() and (out / "vocab.txt").is_file()
    loaded = load_checkpoint(out)
    doc, tensors = state_io.load_state(out)
    vocab = Vocabulary.load(out / "vocab.txt")
    trained = BiLanguageModel(cfg.bilm_options(), len(vocab))
    state_io.restore_model(trained, tensors, out)
    ids = torch.from_numpy(batch_to_ids([["neural", "language", "models", "."], ["unseenword"]]))
    with torch.no_grad():
        want, mask, _ = trained.bilm(ids)
        got, mask2, _ = loaded(ids)
    assert torch.equal(mask, mask2) and got.shape == (3, 2, 6, 32)
    assert torch.allclose(got, want, atol=1e-6, rtol=0)
    assert loaded.info.options.extra["n_tokens_vocab"] == len(vocab)
