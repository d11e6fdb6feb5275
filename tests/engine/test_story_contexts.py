"""Issue 16, item 1: grouped demo sentences, occurrences ordered by group, the permutation test
of within − between, and the layer normalisation before the mix (item 2)."""
import itertools
import math

import numpy as np
import pytest

from elmo_engine.analysis.contexts import compare as cmp
from elmo_engine.analysis.contexts.groups import split_group, word_groups
from elmo_engine.analysis.contexts.permutation import (all_relabellings, group_permutation_test,
                                              n_relabellings)
from elmo_engine.errors import InputError
from elmo_engine.io.datasets.sentences import is_grouped, read_grouped_sentences
from elmo_engine.model.mix import scalar_mix_numpy
from elmo_engine.resources import demo_sentences_path


def _brute_p(sim, groups):
    """Every permutation of the labels (n! of them; duplicates count equally)."""
    idx = [i for i, g in enumerate(groups) if g]
    obs = None
    stats = []
    for perm in itertools.permutations([groups[i] for i in idx]):
        g = list(groups)
        for i, lab in zip(idx, perm):
            g[i] = lab
        w, b = cmp.group_similarity(sim, g)
        stats.append(w - b)
    w, b = cmp.group_similarity(sim, groups)
    obs = w - b
    return float(np.mean(np.array(stats) >= obs - 1e-12))


def test_relabellings_are_distinct_and_complete():
    labels = all_relabellings([2, 2, 1])
    assert labels.shape == (n_relabellings([2, 2, 1]), 5) == (30, 5)
    assert len({tuple(r) for r in labels}) == 30
    assert all(sorted(r) == [0, 0, 1, 1, 2] for r in labels.tolist())


def test_exact_p_equals_brute_force():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(7, 5))
    x[:3] += 2.0                                         # group a is tighter
    sim = cmp.cosine_matrix(x)
    groups = ["a", "a", "a", "b", "b", "", "b"]
    res = group_permutation_test(sim[None], groups)
    assert res.exact and res.n == n_relabellings([3, 3]) == 20
    assert res.p[0] == pytest.approx(_brute_p(sim, groups), abs=1e-12)
    assert 0 < res.p[0] <= 1


def test_separated_groups_get_the_smallest_p_and_ties_get_one():
    x = np.array([[1, 0.1], [1, 0.0], [1, -0.1], [0, 1], [0.1, 1], [-0.1, 1]], float)
    sim = cmp.cosine_matrix(x)
    groups = ["r"] * 3 + ["m"] * 3
    res = group_permutation_test(np.stack([sim, np.ones_like(sim)]), groups)
    assert res.p[0] == pytest.approx(2 / 20)               # the partition and its mirror
    assert res.p[1] == 1.0                                  # all equal: every T ties
    assert "all 20 relabellings" in res.describe()


def test_monte_carlo_when_too_many_and_undefined_without_two_groups(monkeypatch):
    import elmo_engine.analysis.contexts.permutation as P
    monkeypatch.setattr(P, "EXACT_LIMIT", 10)
    monkeypatch.setattr(P, "N_RANDOM", 199)
    rng = np.random.default_rng(0)
    sim = cmp.cosine_matrix(rng.normal(size=(8, 4)))
    res = P.group_permutation_test(sim[None], list("aaaabbbb"))
    assert not res.exact and res.n == 199
    k = res.p[0] * 200 - 1
    assert abs(k - round(k)) < 1e-9 and 1 / 200 <= res.p[0] <= 1
    again = P.group_permutation_test(sim[None], list("aaaabbbb"))
    assert again.p[0] == res.p[0]                           # seeded
    none = P.group_permutation_test(sim[None], list("aaaa") + [""] * 4)
    assert math.isnan(none.p[0]) and none.n == 0


def test_compare_orders_by_group_and_reports_p():
    tokens = [["bank", "a"], ["bank", "b"], ["x", "bank"], ["bank"]]
    rng = np.random.default_rng(1)
    acts = [rng.normal(size=(3, len(t), 4)).astype(np.float32) for t in tokens]
    groups = {(1, 0): "money", (0, 0): "river", (2, 1): "river"}
    comp, vec, total = cmp.compare_word(tokens, acts, "bank", groups=groups)
    assert total == 4
    assert comp.occurrences == ((0, 0), (2, 1), (1, 0), (3, 0))
    assert comp.groups == ("river", "river", "money", "")
    assert comp.p_value.shape == (4,) and comp.test.n == 3
    assert [r[0] for r in comp.summary_rows()][-1] == "p (permutation)"
    np.testing.assert_allclose(vec[:, 1], acts[2][:, 1])


def test_layer_norm_mix_is_scalar_mix_with_do_layer_norm():
    rng = np.random.default_rng(2)
    tokens = [["w", "a", "w"], ["b", "w"]]
    acts = [rng.normal(size=(3, len(t), 6)).astype(np.float32) for t in tokens]
    acts[0][0] *= 40                                     # layer 0 far larger, as in ELMo
    acts[1][0] *= 40
    w = [0.2, 0.3, 0.5]
    comp, vec, _ = cmp.compare_word(tokens, acts, "w", w, layer_norm=True)
    allv = np.concatenate([a for a in acts], axis=1)      # (3, 5, 6) every token
    ref = scalar_mix_numpy(allv, np.log(w), layer_norm=True)          # (5, 6)
    places = [0, 2, 4]                                    # the 'w' tokens among the 5
    np.testing.assert_allclose(comp.matrices[-1], cmp.cosine_matrix(ref[places]), atol=1e-5)
    plain, _, _ = cmp.compare_word(tokens, acts, "w", w)
    assert comp.layer_norm and not plain.layer_norm
    assert not np.allclose(plain.matrices[-1], comp.matrices[-1])


def test_grouped_reader_and_demo_groups(tmp_path):
    pairs = read_grouped_sentences(demo_sentences_path())
    assert len(pairs) == 40 and pairs[0] == ("bank: river", "He sat on the bank of the river "
                                              "and watched the boats.")
    assert sum(g.startswith("bank:") for g, _ in pairs) == 10
    plain = tmp_path / "p.txt"
    plain.write_text("# not a comment here\n\nA  sentence .\n", encoding="utf-8")
    assert not is_grouped(plain)
    assert read_grouped_sentences(plain) == [("", "# not a comment here"), ("", "A sentence .")]
    g = tmp_path / "g.txt"
    g.write_text("# c\nriver\tOn the bank .\nno group here\n\t  \n", encoding="utf-8")
    assert is_grouped(g)
    assert read_grouped_sentences(g) == [("river", "On the bank ."), ("", "no group here")]
    bad = tmp_path / "b.tsv"
    bad.write_bytes(b"a\tok\nb\t\xff\n")
    with pytest.raises(InputError, match="b.tsv"):
        read_grouped_sentences(bad)


def test_word_groups_rule():
    assert split_group("bank: river") == ("bank", "river")
    assert split_group("river") == (None, "river")
    tokens = [["The", "Bank", "of", "the", "bank"], ["a", "play"], ["bank"], ["bank"]]
    groups = ["bank: river", "play: game", "", "money"]
    assert word_groups("bank", tokens, groups) == {(0, 1): "river", (0, 4): "river",
                                                   (3, 0): "money"}
    assert word_groups("play", tokens, groups) == {(1, 1): "game"}
