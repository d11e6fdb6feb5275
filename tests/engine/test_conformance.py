"""The engine against the published reference outputs (docs/checkpoint-format.md §8, §13)."""
from __future__ import annotations

import json

import h5py
import numpy as np
import pytest

from elmo_engine.model.checkpoint import load_checkpoint
from elmo_engine.embed.embedder import Embedder
from elmo_engine.model.reference import ReferenceBiLM

from support import FIXTURES

TOL = 1e-5


@pytest.fixture(scope="module")
def bilm_tf():
    return load_checkpoint(FIXTURES / "bilm-tf" / "model")


@pytest.fixture(scope="module")
def allennlp():
    return load_checkpoint(FIXTURES / "allennlp")


def _lists(path):
    return [[s.split() for s in lst] for lst in json.loads(path.read_text())]


def test_bilm_tf_reference_outputs_stateful(bilm_tf):
    """10 stateful batches of 3, as upstream made them: every token within 1e-5."""
    lists = _lists(FIXTURES / "bilm-tf" / "model" / "lm_embeddings_sentences.json")
    emb = Embedder(bilm_tf)
    emb.reset_state()
    order = [lists[k][i] for i in range(10) for k in range(3)]
    out = emb.embed_stateful(order, batch_size=3)
    worst = 0.0
    n_tokens = 0
    for k in range(3):
        with h5py.File(FIXTURES / "bilm-tf" / "expected" / f"lm_embeddings_{k}.hdf5", "r") as fh:
            for i in range(10):
                expected = fh[str(i)][()]                           # (2, n, 16): fwd, bwd of top
                got = out[i * 3 + k][2]                              # (n, 32)
                assert got.shape == (expected.shape[1], 32)
                got = np.stack([got[:, :16], got[:, 16:]])
                worst = max(worst, float(np.abs(got - expected).max()))
                n_tokens += got.shape[1]
    assert n_tokens == 744
    assert worst <= TOL, f"largest |error| {worst}"


def test_stateless_differs_from_reference_protocol(bilm_tf):
    """The state really matters on this model (docs/checkpoint-format.md §8): stateless ≠
    stateful after batch 1."""
    lists = _lists(FIXTURES / "bilm-tf" / "model" / "lm_embeddings_sentences.json")
    emb = Embedder(bilm_tf)
    order = [lists[k][i] for i in range(3) for k in range(3)]
    stateful = emb.embed_stateful(order, batch_size=3)
    stateless = emb.embed(order)
    assert np.abs(stateful[0] - stateless[0]).max() < TOL          # first batch: zero state
    assert np.abs(stateful[5][2] - stateless[5][2]).max() > 1e-2
    emb.reset_state()
    again = emb.embed_stateful(order, batch_size=3)
    assert all(np.array_equal(a, b) for a, b in zip(again, stateful))


@pytest.mark.parametrize("which", ["allennlp", "bilm_tf"])
def test_fast_path_matches_plain_reference(which, request):
    model = request.getfixturevalue(which)
    lists = _lists(FIXTURES / "allennlp" / "sentences.json")
    sents = [lists[0][0], lists[1][3], lists[2][5], ["•", "<S>", "x"], ["a"]]
    ref = ReferenceBiLM(model)
    got = Embedder(model).embed(sents)
    for s, g in zip(sents, got):
        r = ref.embed(s)
        assert g.shape == (3, len(s), 32) == r.shape
        assert np.abs(g - r).max() <= TOL


def test_batch_invariance(allennlp):
    """A sentence gets the same vectors whatever batch it is in."""
    lists = _lists(FIXTURES / "allennlp" / "sentences.json")
    sents = [s for lst in lists for s in lst]
    alone = [Embedder(allennlp).embed([s])[0] for s in sents[:6]]
    together = Embedder(allennlp, token_budget=100_000).embed(sents)
    small = Embedder(allennlp, token_budget=64).embed(sents[::-1])[::-1]
    for a, b, c in zip(alone, together, small):
        assert np.abs(a - b).max() <= TOL and np.abs(a - c).max() <= TOL


def test_layer0_is_context_free_and_padding_free(allennlp):
    emb = Embedder(allennlp)
    a, b = emb.embed([["the", "bank", "of", "the", "river"], ["bank"]])
    np.testing.assert_array_equal(a[0, 1], b[0, 0])
    np.testing.assert_array_equal(a[0, 1, :16], a[0, 1, 16:])   # [tok, tok]
    assert not np.allclose(a[2, 1], b[2, 0])
