"""Sense induction (k by silhouette, typical sentences, distinctive words, purity, ARI) and the
nearest-neighbour WSD of Peters et al. 2018 §5.3, on synthetic vectors and the demo WSD task."""
from __future__ import annotations

import json

import numpy as np
import pytest

from support import FIXTURES, REPO
from elmo_engine.cli.main import main
from elmo_engine.index.sense_eval import _score, wsd_nn
from elmo_engine.index.senses import (Occurrence, choose_clusters, cluster_layer,
                                      distinctive_words, induce_from_index, purity)


def blobs(sizes, dim=16, spread=0.05, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(len(sizes), dim))
    x = np.concatenate([c + spread * rng.normal(size=(n, dim)) for c, n in zip(centres, sizes)])
    gold = [f"s{i}" for i, n in enumerate(sizes) for _ in range(n)]
    return x.astype(np.float32), gold


def occurrences(gold):
    ctx = {"s0": ["river", "water"], "s1": ["money", "loan"], "s2": ["seat", "park"]}
    return [Occurrence(i, 2, tuple(ctx[g][:1] + ["the", "bank", "of"] + ctx[g][1:] + ["."]))
            for i, g in enumerate(gold)]


def test_silhouette_finds_the_three_senses():
    x, gold = blobs([30, 20, 25])
    labels, sil, tried = choose_clusters(x, k_max=6)
    assert len(set(labels.tolist())) == 3 and sil > 0.5
    assert [k for k, _ in tried] == [2, 3, 4, 5, 6]
    assert max(tried, key=lambda p: p[1])[0] == 3
    assert purity(labels, gold) == 1.0


def test_cluster_layer_scores_and_describes_clusters():
    x, gold = blobs([30, 20, 25])
    occs = occurrences(gold)
    ls = cluster_layer(2, x, occs, k_max=5, gold=gold)
    assert ls.layer == 2 and ls.k == 3 and ls.purity == 1.0 and ls.ari == pytest.approx(1.0)
    assert sorted(c.size for c in ls.clusters) == [20, 25, 30]
    for c in ls.clusters:
        assert all(ls.labels[i] == c.label for i in c.typical) and len(c.typical) == 3
        top = [w for w, _ in c.context_words]
        sense = c.majority
        expect = {"s0": {"river", "water"}, "s1": {"money", "loan"}, "s2": {"seat", "park"}}
        assert set(top) == expect[sense]                 # "the", "of" are in every cluster
        assert "bank" not in top
    # a random labelling scores near chance
    rng = np.random.default_rng(1)
    shuffled = cluster_layer(2, x, occs, gold=list(rng.permutation(gold)))
    assert shuffled.ari < 0.1 and shuffled.purity < 0.6


def test_identical_vectors_make_one_cluster():
    x = np.ones((10, 8), np.float32)
    labels, sil, tried = choose_clusters(x)
    assert labels.tolist() == [0] * 10 and np.isnan(sil) and tried == ()


def test_distinctive_words_log_odds():
    gold = ["s0"] * 10 + ["s1"] * 10
    occs = occurrences(gold)
    labels = np.array([0] * 10 + [1] * 10)
    words = distinctive_words(occs, labels, 1)
    assert [w for w, _ in words] == ["loan", "money"] and words[0][1] > 1.5


def test_induce_from_index(tmp_path, capsys):
    corpus = tmp_path / "c.txt"
    lines = (REPO / "resources" / "reference_corpus" / "sentences.txt").read_text(
        "utf-8").splitlines()[:40]
    corpus.write_text("\n".join(lines) + "\n", "utf-8")
    assert main(["index", str(corpus), "--out", str(tmp_path / "ix"), "--checkpoint",
                 str(FIXTURES / "allennlp"), "--shard-size", "10"]) == 0
    from elmo_engine.index.search import CorpusIndex

    ix = CorpusIndex(tmp_path / "ix")
    try:
        res = induce_from_index(ix, "the", k_max=4, max_occurrences=25)
        n_the = len(ix.rows_of("the"))
    finally:
        ix.close()
    assert res.n_total == n_the > 25 and len(res.occurrences) == 25
    assert all(o.tokens[o.position].casefold() == "the" for o in res.occurrences)
    assert [ls.layer for ls in res.layers] == [1, 2]
    for ls in res.layers:
        assert 1 <= ls.k <= 4 and len(ls.labels) == 25 and ls.purity is None
        assert ls.k == 1 or min(c.size for c in ls.clusters) >= 5     # no sense of 2 or 3
        assert sum(c.size for c in ls.clusters) == 25
    capsys.readouterr()
    assert main(["senses", str(tmp_path / "ix"), "--word", "the", "--k-max", "3",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["word"] == "the" and len(out["layers"]) == 2
    assert main(["senses", str(tmp_path / "ix"), "--word", "zebra"]) == 1
    assert "does not occur" in capsys.readouterr().err


def test_wsd_scoring():
    s = _score(1, ["a", "b", None, "d"], [("a",), ("c",), ("x",), ("d", "e")], 0)
    assert s.precision == pytest.approx(2 / 3) and s.recall == pytest.approx(0.5)
    assert s.f1 == pytest.approx(2 * (2 / 3) * 0.5 / (2 / 3 + 0.5))


@pytest.mark.slow
def test_wsd_nn_on_the_demo_task():
    """The demo WSD task (bank, play, … in bundled sentences): sense representations from its
    train split, scored on its test split with the demo model."""
    from elmo_engine.embed.embedder import Embedder
    from elmo_engine.io.datasets.demo import load_demo_wsd
    from elmo_engine.model.checkpoint import load_checkpoint
    from elmo_engine.resources import demo_checkpoint_path

    train, test = load_demo_wsd("train"), load_demo_wsd("test")
    emb = Embedder(load_checkpoint(demo_checkpoint_path()), device="cpu", cache_size=0)
    res = wsd_nn(train, test, emb, [0, 1, 2])
    n = sum(len(s.instances) for s in test)
    assert res.first_sense.n == n and [s.layer for s in res.layers] == [0, 1, 2]
    f1 = {s.layer: s.f1 for s in res.layers}
    # the token layer cannot tell senses of one word form apart; the LSTM layers can
    assert f1[2] > f1[0] + 0.1 and f1[1] > f1[0] + 0.1
    assert f1[2] > res.first_sense.f1


def test_a_sense_needs_five_occurrences():
    """Issue 39: 5–6 occurrences were split into 3–4 "senses"; a cluster now needs at least
    MIN_CLUSTER_SIZE occurrences, and fewer than twice that make one cluster."""
    from elmo_engine.index.senses import MIN_CLUSTER_SIZE

    x, _gold = blobs([3, 3])                     # two tiny, well separated groups
    labels, sil, tried = choose_clusters(x)
    assert MIN_CLUSTER_SIZE == 5 and labels.tolist() == [0] * 6 and tried == ()
    x, gold = blobs([30, 3, 25])                 # a blob of 3 is no sense of its own
    labels, _sil, tried = choose_clusters(x, k_max=5)
    assert np.bincount(labels).min() >= MIN_CLUSTER_SIZE and 3 in dict(tried)
    assert len(set(labels.tolist())) == 2


def test_cluster_numbers_follow_the_occurrences_across_layers():
    """Issue 39: cluster numbers were not aligned across layers."""
    from elmo_engine.index.senses import align_layers

    x, gold = blobs([30, 20, 25])
    occs = occurrences(gold)
    a = cluster_layer(1, x, occs, k_max=4, seed=0)
    perm = np.random.default_rng(3).permutation(len(x))          # other k-means numbering
    inv = np.argsort(perm)
    b_raw = cluster_layer(2, x[perm], [occs[i] for i in perm], k_max=4, seed=5)
    b_labels = np.asarray(b_raw.labels)[inv]                    # back in occurrence order
    from elmo_engine.index.senses import LayerSenses

    b = LayerSenses(2, b_raw.k, b_raw.silhouette, b_raw.silhouettes, tuple(b_labels.tolist()),
                    b_raw.clusters, None, None)
    first, second = align_layers([a, b])
    assert first == a                                            # the first keeps its numbers
    assert list(second.labels) == list(a.labels)                 # the same senses, same numbers
    assert [c.label for c in second.clusters] == sorted(c.label for c in second.clusters)
    assert {c.label: c.size for c in second.clusters} == {c.label: c.size for c in a.clusters}


def test_cluster_labels_leave_out_stop_words():
    """Issue 39: clusters were labelled with stop words ("the", "of", "'s")."""
    gold = ["s0"] * 10 + ["s1"] * 10
    occs = [Occurrence(i, 2, ("of", "the", "bank", "'s", "and") + (("river",) if g == "s0"
                                                                   else ("loan",)))
            for i, g in enumerate(gold)]
    occs[:10] = [Occurrence(i, 2, ("of", "the", "bank", "'s", "which", "river")) for i in range(10)]
    labels = np.array([0] * 10 + [1] * 10)
    words = [w for w, _ in distinctive_words(occs, labels, 0)]
    assert words == ["river"]                                   # not "which"
