"""The "Language model" view's model alone (no Qt): rank bins, the cache per checkpoint and
tokens, the missing-softmax line, the reach rows, the detail text, minimal-pair rows and the
saved view state. Results come from the engine on a tiny random checkpoint with a test-written
softmax in the published layout."""
from __future__ import annotations

import numpy as np
import pytest

from elmo_engine.analysis.language_model import (MinimalPair, predict, reach, score_pairs)
from elmo_engine.embed.embedder import Embedder
from elmo_engine.io.figures.language_model import RANK_COLORS
from elmo_engine.model.checkpoint import load_checkpoint
from elmo_engine.model.softmax import load_softmax
from lm_helpers import checkpoint_with_softmax
from elmo_explorer.views.language_model.model import (LRU, LanguageModelModel, LMOptions,
                                                      missing_softmax_line, rank_bin)

pytestmark = pytest.mark.usefixtures("torch_one_thread")
SENT = ("the", "cat", "sat", "on", "the", "zebra", ".")


@pytest.fixture(scope="module")
def lm(tmp_path_factory, tiny_checkpoint):
    folder = checkpoint_with_softmax(tiny_checkpoint, tmp_path_factory.mktemp("lm") / "model", 5)
    emb = Embedder(load_checkpoint(folder), device="cpu")
    softmax = load_softmax(folder, output_dim=emb.opts.output_dim)
    return folder, emb, softmax


def test_rank_bins_follow_gltr_and_have_four_colours():
    assert [rank_bin(r) for r in (1, 10, 11, 100, 101, 1000, 1001, 793_471)] == \
        [0, 0, 1, 1, 2, 2, 3, 3]
    assert len(set(RANK_COLORS)) == 4


def test_lru_keeps_the_most_recent():
    c = LRU(2)
    c.put("a", 1)
    c.put("b", 2)
    assert c.get("a") == 1                       # a is now the most recent
    c.put("c", 3)
    assert "b" not in c and c.get("a") == 1 and c.get("c") == 3 and len(c) == 2


def test_missing_softmax_line_names_the_file_and_where_to_get_it(tmp_path, lm):
    line = missing_softmax_line(tmp_path)
    assert "\n" not in line
    assert "*softmax_weights.hdf5" in line and "softmax.safetensors" in line
    assert "File → Get a published model…" in line
    assert "elmo-explorer models get NAME --with-softmax" in line
    (tmp_path / "training.json").write_text("{}", "utf-8")      # a model train-lm wrote
    own = missing_softmax_line(tmp_path)
    assert "missing softmax.safetensors and vocab.txt beside training.json" in own
    assert "Get a published model" not in own
    (tmp_path / "training.json").unlink()
    assert missing_softmax_line(lm[0]) is None
    (tmp_path / "softmax.safetensors").write_bytes(b"")
    assert missing_softmax_line(tmp_path) is None


def test_options_reject_invalid_values(tmp_path):
    base = LMOptions(top_k=7)
    assert LMOptions.from_dict({"top_k": 0}, base).top_k == 7
    assert LMOptions.from_dict({"top_k": True}, base).top_k == 7
    assert LMOptions.from_dict({"top_k": 25}, base).top_k == 25
    assert LMOptions.from_dict({"pairs": str(tmp_path / "nope.tsv")}).pairs == "bundled"
    f = tmp_path / "p.tsv"
    f.write_text("set\tgood\tbad\n", encoding="utf-8")
    assert LMOptions.from_dict({"pairs": str(f)}).pairs == str(f)


def test_results_are_cached_per_checkpoint_and_tokens(lm):
    _folder, emb, softmax = lm
    m = LanguageModelModel()
    m.model_changed("sum-a")
    assert m.show_sentence(0, SENT, 2) is False and m.needs() == (True, True)
    preds = predict(emb, softmax, [SENT], top_k=m.options.top_k)[0]
    r = reach(emb, SENT)
    m.store(SENT, m.options.top_k, preds, r)
    assert m.predictions is preds and m.reach is r
    m.show_sentence(1, ("a", "dog", "."), None)
    assert m.predictions is None and m.token == 1               # the middle token by default
    assert m.show_sentence(0, SENT, 3) is True and m.predictions is preds and m.token == 3
    m.model_changed("sum-b")                                    # another checkpoint: not cached
    assert m.show_sentence(0, SENT, 3) is False and m.predictions is None
    m.options.top_k = 3                                         # another k: predictions again
    m.model_changed("sum-a")
    m.show_sentence(0, SENT, 3)
    assert m.needs() == (True, False)
    m.softmax_problem = "no softmax"                            # then only the reach is needed
    assert m.needs() == (False, False)


def test_bins_detail_and_reach_rows_come_from_the_engine(lm):
    _folder, emb, softmax = lm
    m = LanguageModelModel()
    m.model_changed("x")
    m.show_sentence(0, SENT, 5)
    preds = predict(emb, softmax, [SENT], top_k=4)[0]
    m.options.top_k = 4
    r = reach(emb, SENT)
    m.store(SENT, 4, preds, r)
    assert m.token_bins() == [(rank_bin(f.rank), rank_bin(b.rank))
                              for f, b in zip(preds.forward, preds.backward)]
    html = m.detail_html(5)
    assert "zebra" in html and "&lt;UNK&gt;" in html            # outside the vocabulary
    assert f"rank {preds.forward[5].rank:,}" in html
    assert f"surprisal {preds.backward[5].surprisal:.2f} bits" in html
    assert f"entropy {preds.forward[5].entropy:.2f} bits" in html
    for c in preds.forward[5].top + preds.substitutes[5]:
        assert f"{c.prob:.3f}" in html
    rows, labels = m.reach_heatmap()
    n_layers = r.distance.shape[0]
    assert rows.shape == (2 * n_layers, len(SENT))
    assert labels[0] == "layer 0 forward" and labels[-1] == f"layer {n_layers - 1} backward"
    np.testing.assert_array_equal(rows[2 * 1 + 1], r.distance[1, 1, 5])
    assert rows[1 * 2 + 0, 6] <= 1e-6                           # forward: nothing on its right
    assert rows[2, :5].max() > 0                                # … but the words on its left
    assert m.reach_top() == pytest.approx(float(np.delete(rows, 5, axis=1).max()))
    assert "'zebra', layer 1 forward" in m.reach_hover(2, 0)
    assert m.perplexity_text().startswith(f"Perplexity: forward {preds.perplexity[0]:,.1f}")


def test_pairs_rows_and_differences(lm):
    _folder, emb, softmax = lm
    pairs = [MinimalPair("agr", ("the", "cat", "sits"), ("the", "cats", "sits")),
             MinimalPair("agr", ("a", "dog", "sat"), ("a", "dog", "sits")),
             MinimalPair("det", ("a", "cat", "."), ("a", "cats", "."))]
    scores = score_pairs(emb, softmax, pairs)
    m = LanguageModelModel()
    m.store_pairs("bundled", scores)
    assert m.pair == 0
    rows = m.accuracy_rows()
    assert [r[:2] for r in rows] == [("agr", 2), ("det", 1)]
    assert rows[0][2] == pytest.approx(sum(s.correct(0) for s in scores[:2]) / 2)
    assert m.pair_rows()[1] == ("agr", "a dog sat", "a dog sits", scores[1].correct(0),
                                scores[1].correct(1))
    words, fwd, bwd = m.pair_differences(1)
    assert words == ["a", "dog", "sat/sits"]
    assert np.abs(fwd[:2]).max() == 0.0                         # forward: same before the change
    assert fwd[2] == pytest.approx(scores[1].forward_diff[2])
    assert bwd[2] == pytest.approx(scores[1].backward_diff[3])


def test_view_state_round_trips_and_ignores_bad_values():
    m = LanguageModelModel()
    m.options.top_k = 12
    m.show_sentence(2, ("a", "b", "c"), 1)
    m.store_pairs("bundled", ())
    state = m.view_state()
    assert state["top_k"] == 12 and state["sentence"] == 2 and state["token"] == 1
    n = LanguageModelModel()
    assert n.restore(state) == ((2, 1), "bundled", None)
    assert n.options.top_k == 12
    assert n.restore({"top_k": "x", "sentence": -1, "token": 0, "pairs": 3}) == (None, None, None)
    assert n.options.top_k == 12
    assert n.restore(None) == (None, None, None)


def test_the_recorded_bundled_scores_are_read_only_for_their_model_and_pairs():
    import json

    from elmo_engine.analysis.language_model import accuracy_by_set, read_pairs
    from elmo_engine.analysis.language_model.pairs import bundled_pairs
    from elmo_engine.resources import HERE
    from elmo_explorer.views.language_model.model import RECORDED_PAIRS, read_recorded_pairs

    path = HERE / RECORDED_PAIRS
    doc = json.loads(path.read_text(encoding="utf-8"))
    bundled = [p for f in bundled_pairs() for p in read_pairs(f)]
    scores = read_recorded_pairs(path, doc["model"]["checksum"], bundled)
    assert len(scores) == len(bundled) == 90
    got = {a.set: a.accuracy for a in accuracy_by_set(scores)}
    for rec in doc["result"]["sets"]:
        assert got[rec["set"]] == pytest.approx((rec["forward"], rec["backward"], rec["combined"]))
    assert read_recorded_pairs(path, "another model", bundled) is None
    assert read_recorded_pairs(path, doc["model"]["checksum"], bundled[1:]) is None
    swapped = [bundled[1], bundled[0]] + bundled[2:]
    assert read_recorded_pairs(path, doc["model"]["checksum"], swapped) is None
