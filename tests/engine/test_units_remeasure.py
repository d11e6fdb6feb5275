"""A probe's accuracy and a word's similarity across contexts re-measured under an intervention
(issue 40): nothing ablated changes nothing; ablating the planted unit changes both as computed
by hand (the planted model has no recurrence, so layer 1's forward half moves by exactly
−m[UNIT]·W_p[UNIT])."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from elmo_engine.analysis.units.remeasure import (fit_probe, layer_vectors, mean_pairwise_cosine,
                                                  probe_under, similarity_measure,
                                                  similarity_under)
from elmo_engine.errors import InputError
from elmo_engine.model.lstm_inspect import (Capture, Intervention, Op, StateKind, framed_tokens,
                                            inspect)
from test_units_rank import UNIT, planted_model, planted_sentences, planted_vectors

pytestmark = pytest.mark.usefixtures("torch_one_thread")

ZERO_PLANTED = Intervention(0, 0, StateKind.C, (UNIT,), Op.ZERO)


def by_hand(model, sents):
    """Layer 1's vectors per sentence with the planted cell zeroed, from the unchanged run:
    the forward half minus m[UNIT]·W_p[UNIT] (the rest unchanged)."""
    tok, lengths = framed_tokens(model, sents, planted_vectors)
    base = inspect(model, tok, lengths, Capture(kinds=(StateKind.M,), layers=(0,),
                                                directions=(0,), dtype=torch.float32))
    m = base.states[(0, 0, StateKind.M)][:, :, UNIT]                  # (B, T)
    moved = base.layers[1].clone()
    moved[:, :, :8] -= m[:, :, None] * model.lstm.wp[0][0][UNIT]
    return [moved[r, 1:len(s) + 1].detach().numpy() for r, s in enumerate(sents)]


def test_layer_vectors_are_the_step_paths_layers():
    model = planted_model()
    sents = [s.tokens for s in planted_sentences(5)]
    got = layer_vectors(model, sents, 2, token_vectors=planted_vectors)
    tok, lengths = framed_tokens(model, sents, planted_vectors)
    want = inspect(model, tok, lengths).layers[2]
    for r, s in enumerate(sents):
        assert got[r].shape == (len(s), 16)
        assert np.abs(got[r] - want[r, 1:len(s) + 1].numpy()).max() < 1e-6
    with pytest.raises(InputError, match="representation layer 3"):
        layer_vectors(model, sents, 3, token_vectors=planted_vectors)


def test_ablating_nothing_changes_nothing():
    model = planted_model()
    sents = planted_sentences(40)
    probe = fit_probe(model, sents, 1, token_vectors=planted_vectors)
    res = probe_under(model, probe, [], planted_vectors)
    assert res.before == res.after
    assert res.test_tokens > 20 and res.train_tokens > 3 * res.test_tokens / 2
    sim = similarity_under(model, "Paris", [s.tokens for s in sents], 1, [], planted_vectors)
    assert sim.before == sim.after and len(sim.occurrences) >= 2
    assert np.allclose(sim.shift, 1.0, atol=1e-6)


def test_ablating_the_planted_unit_changes_the_measures_as_computed_by_hand():
    model = planted_model()
    sents = planted_sentences(40)
    tokens = [s.tokens for s in sents]
    # the similarity of 'the' across its contexts: the mean cosine of every two occurrences
    sim = similarity_under(model, "the", tokens, 1, [ZERO_PLANTED], planted_vectors)
    moved = by_hand(model, tokens)
    vecs = np.stack([moved[s][t] for s, t in sim.occurrences])
    cos = [float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))
           for a, b in itertools.combinations(vecs, 2)]
    assert sim.after == pytest.approx(np.mean(cos), abs=1e-5)
    assert abs(sim.after - sim.before) > 1e-3                   # it did move
    before = np.stack([layer_vectors(model, [tokens[s]], 1, token_vectors=planted_vectors)[0][t]
                       for s, t in sim.occurrences])
    for k, (a, b) in enumerate(zip(before, vecs)):
        assert sim.shift[k] == pytest.approx(a @ b / np.linalg.norm(a) / np.linalg.norm(b),
                                             abs=1e-5)
    assert similarity_measure(model, "the", tokens, 1, planted_vectors)([ZERO_PLANTED]) == \
        pytest.approx(sim.after, abs=1e-9)
    # the probe: its own weights applied to the vectors computed by hand
    probe = fit_probe(model, sents, 1, token_vectors=planted_vectors)
    res = probe_under(model, probe, [ZERO_PLANTED], planted_vectors)
    test_moved = by_hand(model, [s.tokens for s in probe.test])
    x = np.concatenate([v for v in test_moved])
    y = np.array([probe.classes.index(lab) for s in probe.test for lab in s.labels])
    z = (x - probe.mean) / probe.sd
    pred = (z @ probe.weights[:-1].numpy() + probe.weights[-1].numpy()).argmax(1)
    assert res.after == pytest.approx(float((pred == y).mean()), abs=1e-9)
    assert res.before == 1.0                       # layer 1 reads capitals off the planted cell
    assert res.after < res.before


def test_a_word_seen_once_is_one_line():
    model = planted_model()
    with pytest.raises(InputError, match="'Zed' occurs 0 time"):
        similarity_under(model, "Zed", [["Paris", "sat"]], 1, [], planted_vectors)
    assert mean_pairwise_cosine(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])) == \
        pytest.approx((0 + 2 ** -0.5 + 2 ** -0.5) / 3)
