"""Units ranked for a property and ablated (issue 40): a planted unit is found first and its
ablation changes the outputs as computed by hand; the step path scores minimal pairs as the
Language model view does; CoNLL-U FEATS labels."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from support import REPO
from elmo_engine.analysis.language_model.pairs import MinimalPair, read_pairs, score_pairs
from elmo_engine.analysis.units.ablate import ablation_experiment, pair_accuracy, sentence_log_probs
from elmo_engine.analysis.units.collect import collect
from elmo_engine.analysis.units.rank import Method, RankSettings, rank_units
from elmo_engine.errors import InputError
from elmo_engine.io.datasets.conllu import read_conllu
from elmo_engine.io.datasets.records import LabelledSentence
from elmo_engine.model.bilm import BiLM
from elmo_engine.model.lstm_inspect import (Capture, Intervention, Op, StateKind, framed_tokens,
                                            inspect)
from elmo_engine.model.options import BiLMOptions

pytestmark = pytest.mark.usefixtures("torch_one_thread")

UNIT = 5                     # the planted cell
WORDS = ["Paris", "the", "river", "London", "ran", "Anna", "a", "bank", "Rome", "sat", "green",
         "Bob", "old", "mill", "York", "of"]


def planted_model() -> BiLM:
    """A biLM whose layer-0 forward cell UNIT holds ≈ +1 on a capitalised word and ≈ −1 on any
    other (input gate open, forget gate shut, candidate tanh(6·x₀ − 3), where token dimension 0
    is 1 for a capital); no recurrence, so every step can be computed by hand."""
    opts = BiLMOptions(filters=((1, 4),), char_embed_dim=4, n_highway=0, projection_dim=8,
                       lstm_dim=16, n_layers=2, cell_clip=None, proj_clip=None)
    model = BiLM(opts).eval()
    gen = torch.Generator().manual_seed(3)
    d = opts.lstm_dim
    with torch.no_grad():
        for p in model.lstm.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.2)
        for w in model.lstm.w_rec:
            w.zero_()
        w_in, b = model.lstm.w_in[0][0], model.lstm.b[0][0]
        w_in[:, UNIT::d] = 0.0                                        # the unit's four gates
        b[UNIT], b[2 * d + UNIT], b[3 * d + UNIT] = 10.0, -11.0, 10.0  # i open, f shut, o open
        w_in[0, d + UNIT], b[d + UNIT] = 6.0, -3.0                     # candidate from dim 0
    return model


def planted_vectors(types):
    """Token vectors: dimension 0 is 1 for a capitalised word, the rest fixed noise."""
    out = np.zeros((len(types), 8), dtype=np.float32)
    for k, t in enumerate(types):
        rng = np.random.default_rng(sum(map(ord, t)))
        out[k] = rng.normal(0, 0.5, 8)
        out[k, 0] = 1.0 if t[:1].isupper() else 0.0
    return out


def planted_sentences(n: int = 120):
    rng = np.random.default_rng(0)
    out = []
    for _ in range(n):
        toks = tuple(str(w) for w in rng.choice(WORDS, size=int(rng.integers(3, 9))))
        out.append(LabelledSentence(toks, tuple("Cap" if t[0].isupper() else "low"
                                                for t in toks)))
    return out


def test_the_planted_unit_is_ranked_first_by_both_methods():
    model = planted_model()
    data = collect(model, planted_sentences(), [StateKind.C, StateKind.H],
                   token_vectors=planted_vectors)
    assert data.classes == ("Cap", "low") and len(data) > 300
    others = rank_units(data, RankSettings(ks=()), keys=[(1, 0, StateKind.C)])
    assert others[0].key == (1, 0, StateKind.C) and not others[0].curve
    (planted,) = rank_units(data, RankSettings(ks=(1,), seeds=3), keys=[(0, 0, StateKind.C)])
    for method in Method:
        assert planted.top(method, 1) == (UNIT,), method
    one = [p for p in planted.curve if p.k == 1 and p.method is Method.MEAN_DIFF][0]
    assert one.top == 1.0 and np.mean(one.random) < 0.95              # the unit alone carries it
    assert planted.full == 1.0 and planted.majority < 0.8


def test_ablating_the_planted_unit_changes_the_outputs_as_computed_by_hand():
    """Without recurrence and clips, zeroing c[UNIT] zeroes m[UNIT] = o·tanh(c), so layer 0's
    forward output moves by exactly −m[UNIT]·W_p[UNIT] at every position, and nothing else in
    layer 0 moves."""
    model = planted_model()
    sents = [s.tokens for s in planted_sentences(6)]
    tok, lengths = framed_tokens(model, sents, planted_vectors)
    base = inspect(model, tok, lengths, Capture(kinds=(StateKind.M,), layers=(0,),
                                                directions=(0,), dtype=torch.float32))
    iv = Intervention(0, 0, StateKind.C, (UNIT,), Op.ZERO)
    got = inspect(model, tok, lengths, interventions=[iv]).layers
    m_unit = base.states[(0, 0, StateKind.M)][:, :, UNIT]              # (B, T)
    expected = base.layers[1, :, :, :8] - m_unit[:, :, None] * model.lstm.wp[0][0][UNIT]
    assert (got[1, :, :, :8] - expected).abs().max() < 1e-6
    assert torch.equal(got[1, :, :, 8:], base.layers[1, :, :, 8:])
    # the planted cell holds the feature: ≈ +1 on capitals, ≈ −1 elsewhere
    cells = inspect(model, tok, lengths, Capture(kinds=(StateKind.C,), layers=(0,),
                                                 directions=(0,), dtype=torch.float32))
    c = cells.states[(0, 0, StateKind.C)][0, 1:len(sents[0]) + 1, UNIT]
    want = torch.tensor([1.0 if w[0].isupper() else -1.0 for w in sents[0]])
    assert (c - want).abs().max() < 0.02


@pytest.fixture(scope="module")
def demo():
    from elmo_engine.model.checkpoint import load_checkpoint
    from elmo_engine.model.softmax import load_softmax

    folder = REPO / "resources" / "demo_model"
    model = load_checkpoint(folder).eval()
    return model, load_softmax(folder, output_dim=model.opts.output_dim)


def test_step_path_scores_pairs_as_the_language_model_view(demo):
    from elmo_engine.embed.embedder import Embedder

    model, softmax = demo
    pairs = read_pairs(REPO / "resources" / "minimal_pairs" / "agreement_attractors.tsv")[:4]
    emb = Embedder(model, device="cpu")
    ref = score_pairs(emb, softmax, pairs)
    lp = sentence_log_probs(model, softmax, [p.good for p in pairs] + [p.bad for p in pairs])
    for k, s in enumerate(ref):
        for d in (0, 1):
            assert abs(lp[k, d] - s.log_prob[d][0]) < 1e-3
            assert abs(lp[len(pairs) + k, d] - s.log_prob[d][1]) < 1e-3
    acc = pair_accuracy(model, softmax, pairs)
    assert acc.overall == tuple(sum(s.correct(d) for s in ref) / len(ref) for d in range(3))


def test_ablation_experiment_reports_top_and_random_per_direction(demo):
    model, softmax = demo
    pairs = [MinimalPair("a", ("The", "keys", "are", "here", "."),
                         ("The", "keys", "is", "here", ".")),
             MinimalPair("a", ("The", "key", "is", "here", "."),
                         ("The", "key", "are", "here", "."))]
    width = model.opts.lstm_dim
    order = {0: list(range(width)), 1: list(range(width - 1, -1, -1))}
    res = ablation_experiment(model, softmax, pairs, layer=1, state=StateKind.C, order=order,
                              ks=(2, width // 2), seeds=2)
    assert res.top_units[0][:2] == (0, 1) and res.top_units[1][:2] == (width - 1, width - 2)
    assert [r.k for r in res.rows] == [2, width // 2] and len(res.rows[0].random) == 2
    assert all(0.0 <= v <= 1.0 for v in res.baseline.overall)
    # over half the units the "random" control was the complement of the top k (at k = width
    # the same units as the top, no draw at all): refused, naming the bound (an attack pass)
    for k in (width // 2 + 1, width):
        with pytest.raises(InputError, match=f"--k {k}: layer 1's c has {width} units.*at most "
                                             f"{width // 2}"):
            ablation_experiment(model, softmax, pairs, layer=1, state=StateKind.C, order=order,
                                ks=(2, k), seeds=2)


def test_conllu_feats_labels(tmp_path):
    path = tmp_path / "a.conllu"
    path.write_text("# text = The dogs bark\n"
                    "1\tThe\tthe\tDET\tDT\tDefinite=Def|PronType=Art\t2\tdet\t_\t_\n"
                    "2\tdogs\tdog\tNOUN\tNNS\tNumber=Plur\t3\tnsubj\t_\t_\n"
                    "3\tbark\tbark\tVERB\tVBP\tMood=Ind|Number=Plur|Tense=Pres\t0\troot\t_\t_\n"
                    "\n", encoding="utf-8")
    (sent,) = read_conllu(path, label="feats:Number")
    assert sent.labels == (None, "Plur", "Plur")
    (sent,) = read_conllu(path, label="feats:Definite")
    assert sent.labels == ("Def", None, None)
    with pytest.raises(InputError, match="feature name"):
        list(read_conllu(path, label="feats:"))


def test_collect_is_bounded_before_it_allocates():
    model = planted_model()
    with pytest.raises(InputError, match="over the bound"):
        collect(model, planted_sentences(), [StateKind.C], max_bytes=1000,
                token_vectors=planted_vectors)
    with pytest.raises(InputError, match="no labelled"):
        collect(model, [LabelledSentence(("a",), (None,))], [StateKind.C],
                token_vectors=planted_vectors)


def test_token_predictions_are_the_language_model_views_and_move_under_an_intervention(demo):
    from elmo_engine.analysis.language_model.predictions import predict
    from elmo_engine.analysis.units.ablate import token_predictions
    from elmo_engine.embed.embedder import Embedder

    model, softmax = demo
    sent = ("The", "keys", "to", "the", "cabinet", "are", "here", ".")
    ref = predict(Embedder(model, device="cpu"), softmax, [sent], top_k=1,
                  all_substitutes=True)[0]
    got = token_predictions(model, softmax, sent)
    assert got.words == sent
    for d, recs in enumerate((ref.forward, ref.backward)):
        assert np.allclose(got.surprisal[d], [r.surprisal for r in recs], atol=1e-3)
        assert got.top[d] == tuple(r.top[0].word for r in recs)
    # zero every cell of the top layer's forward LM from word 3 on: the forward surprisal of
    # words 1-2 is unchanged (position t acts from t on), later ones move; backward untouched
    iv = Intervention(1, 0, StateKind.C, tuple(range(model.opts.lstm_dim)), Op.ZERO, position=3)
    after = token_predictions(model, softmax, sent, [iv])
    assert np.allclose(after.surprisal[0][:2], got.surprisal[0][:2], atol=1e-4)
    assert max(abs(a - b) for a, b in zip(after.surprisal[0][3:], got.surprisal[0][3:])) > 0.1
    assert np.allclose(after.surprisal[1], got.surprisal[1], atol=1e-4)
    with pytest.raises(InputError, match="empty"):
        token_predictions(model, softmax, ())


def test_number_source_falls_back_to_the_demo_task(monkeypatch):
    from elmo_engine.analysis.units import ablate as mod

    monkeypatch.setattr(mod, "default_ewt_train", lambda: None)
    src = mod.number_source(300)
    assert src.label == "upos" and "demo" in src.name
    assert 300 <= sum(len(s.targets()) for s in src.sentences) < 300 + 60
    if (REPO.parent / "shared" / "data" / "ud_english_ewt").exists():
        monkeypatch.undo()
        ewt = mod.number_source(200)
        assert ewt.label == "feats:Number" and "EWT" in ewt.name
        labels = {t for s in ewt.sentences for t in s.labels if t is not None}
        assert labels <= {"Sing", "Plur", "Ptan"} and {"Sing", "Plur"} <= labels


def test_unit_contexts_values_top_lines_and_histogram(demo):
    from elmo_engine.analysis.units.contexts import (label_histogram, top_contexts,
                                                     unit_values, word_means)

    model, _ = demo
    sents = [s.split() for s in ("The keys to the cabinet are here .", "A dog barks .",
                                 "They sat by the river bank all day .")]
    vals = unit_values(model, sents, 1, 0, StateKind.C, 78)
    assert [len(v) for v in vals] == [len(s) for s in sents]
    tok, lengths = framed_tokens(model, sents)
    res = inspect(model, tok, lengths, Capture(kinds=(StateKind.C,), layers=(1,),
                                               directions=(0,), dtype=torch.float32))
    full = res.states[(1, 0, StateKind.C)][:, :, 78].numpy()
    for r, s in enumerate(sents):
        assert np.allclose(vals[r], full[r, 1:len(s) + 1], atol=1e-6)
    flat = sorted((float(v) for vv in vals for v in vv), reverse=True)
    top = top_contexts(sents, vals, 4)
    assert [c.value for c in top] == pytest.approx(flat[:4])
    c = top[0]
    assert c.word == sents[c.sentence][c.token]
    assert c.left.split() == sents[c.sentence][max(0, c.token - 6):c.token]
    low = top_contexts(sents, vals, 2, lowest=True)
    assert [x.value for x in low] == pytest.approx(sorted(flat)[:2])
    words = word_means(sents, vals, 3)
    assert words[0][1] >= words[1][1] >= words[2][1] and words[0][2] >= 1
    labels = [["N" if w[0].isupper() else ("P" if w == "." else None) for w in s]
              for s in sents]
    h = label_histogram(labels, vals, bins=8)
    assert list(h.counts) == ["P", "N"] or list(h.counts) == ["N", "P"]
    assert int(h.counts["N"].sum()) == 3 and int(h.counts["P"].sum()) == 3
    assert h.means["P"] == pytest.approx(np.mean([v[-1] for v in vals]))
    with pytest.raises(InputError, match="unit 512"):
        unit_values(model, sents, 1, 0, StateKind.C, 512)


def test_pattern_search_finds_the_planted_pattern_first():
    """The planted cell is on (≈ +1) on capitalised words: the query "Paris London" at
    threshold 0.9 turns on only that cell, and the one corpus span of two capitals is found
    first with Jaccard 1; spans of one capital score 0."""
    from elmo_engine.analysis.units.pattern import find_pattern, span_on

    model = planted_model()
    rng = np.random.default_rng(1)
    lower = [w for w in WORDS if w.islower()]
    corpus = [[str(w) for w in rng.choice(lower, size=6)] for _ in range(40)]
    for s in corpus[5:25:4]:
        s[2] = "Anna"                                               # single capitals
    corpus[30][3:5] = ["Rome", "York"]                              # the planted pattern
    labels = [["PROPN" if w[0].isupper() else "X" for w in s] for s in corpus]
    res = find_pattern(model, ["the", "Paris", "London", "ran"], (2, 3), 0.9, 0, 0,
                       StateKind.C, corpus, labels=labels, show=5,
                       token_vectors=planted_vectors)
    assert res.on_units == (UNIT,)
    assert res.spans == sum(len(s) - 1 for s in corpus)
    best = res.matches[0]
    assert (best.sentence, best.start, best.end) == (30, 4, 5)
    assert best.words == ("Rome", "York") and best.pos == ("PROPN", "PROPN")
    assert best.score == 1.0 and best.shared == 1
    assert all(m.score < 1.0 for m in res.matches[1:])
    assert best.left.split() == corpus[30][:3]
    on = span_on(np.array([[1.0, 0.2], [0.8, 0.9], [0.7, 0.1]]), 2, 0.5)
    assert on.tolist() == [[True, False], [True, False]]
    with pytest.raises(InputError, match="--span 3:5"):
        find_pattern(model, ["a", "b", "c"], (3, 5), 0.5, 0, 0, StateKind.C, corpus,
                     token_vectors=planted_vectors)
    with pytest.raises(InputError, match="lower the threshold"):
        find_pattern(model, ["the", "Paris"], (1, 2), 0.5, 0, 0, StateKind.C, corpus,
                     token_vectors=planted_vectors)


def test_a_batch_of_probe_fits_equals_each_fit_alone():
    """The top-k curve fits its probes of one k as one batch (one GEMM per step for all): each
    fit of the batch is the fit it would be alone, with its own columns and its own seed's
    order of the rows, and learns (a planted column is predictive)."""
    from elmo_engine.analysis.units.rank import _softmax_regressions

    gen = torch.Generator().manual_seed(0)
    n, d, classes = 700, 5, 3
    y = torch.randint(0, classes, (n,), generator=gen)
    x = torch.randn(4, n, d, generator=gen)
    x[0, :, 0] += 2.0 * y                                  # fit 0 can learn the labels
    st = RankSettings(batch=128, min_steps=60)
    seeds = (0, 1, 2, 0)
    both = _softmax_regressions(x, y, classes, st, 1e-4, 1e-5, seeds)
    assert both.shape == (4, d + 1, classes)
    for r, seed in enumerate(seeds):
        alone = _softmax_regressions(x[r:r + 1], y, classes, st, 1e-4, 1e-5, (seed,))[0]
        np.testing.assert_allclose(both[r].numpy(), alone.numpy(), atol=1e-5)
    acc = ((x[0] @ both[0, :-1] + both[0, -1]).argmax(1) == y).float().mean()
    assert acc > 0.6                                       # chance: 1/3
    # another seed, another order of the mini-batches: another fit
    assert not torch.allclose(both[0], _softmax_regressions(x[:1], y, classes, st, 1e-4, 1e-5,
                                                            (5,))[0])


def test_the_curve_fitted_one_at_a_time_gives_the_batched_accuracies():
    """``RankSettings(batched=False)`` (the benchmark's baseline) fits each probe of the curve
    alone: the same held-out accuracies as the batch, up to a rare tie of one test word."""
    import dataclasses

    from elmo_engine.analysis.units.collect import UnitData
    from elmo_engine.analysis.units.rank import rank_units

    g = np.random.default_rng(0)
    labels = g.integers(0, 3, 600)
    states = {(0, 0, StateKind.C): (g.standard_normal((600, 24))
                                    + labels[:, None] * (g.random(24) > 0.8)).astype(np.float16)}
    data = UnitData(states, labels, ("a", "b", "c"), np.arange(600) // 6)
    st = RankSettings(ks=(1, 4, 16), seeds=2, min_steps=80, batch=256)
    batched, alone = (rank_units(data, dataclasses.replace(st, batched=b))[0]
                      for b in (True, False))
    assert len(batched.curve) == len(alone.curve) == 6
    tests = round(0.2 * 100) * 6                       # held-out sentences × words each
    for p, q in zip(batched.curve, alone.curve):
        assert (p.k, p.method) == (q.k, q.method)
        np.testing.assert_allclose([p.top, *p.random], [q.top, *q.random], atol=1.5 / tests)
    assert max(p.top for p in batched.curve if p.k == 16) > 0.5       # it learned (chance 1/3)
