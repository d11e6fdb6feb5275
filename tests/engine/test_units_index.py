"""A unit's top contexts and the pattern search over a whole corpus index (``units top --index``,
``units pattern --index``): the ranking is fed a batch at a time
(:class:`~elmo_engine.analysis.units.contexts.UnitTop`, holding the best positions and a sum per
word; the pattern search's best spans), so it gives what the ranking of the values held whole
gives, and over an index's sentences what the same sentences read from a file give."""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support import FIXTURES, REPO
from elmo_engine.analysis.units.contexts import (UnitTop, scan_units, top_contexts,
                                                 unit_values, units_values, word_means)
from elmo_engine.analysis.units.corpus import MAX_SCAN_UNITS
from elmo_engine.cli.main import main
from elmo_engine.errors import CancelledError, InputError
from elmo_engine.index.search import CorpusIndex
from elmo_engine.model.lstm_states import StateKind
from elmo_engine.progress import TaskState

pytestmark = pytest.mark.usefixtures("torch_one_thread")

TINY = FIXTURES / "allennlp"
CK = ["--checkpoint", str(TINY), "--device", "cpu"]
CORPUS = REPO / "resources" / "reference_corpus" / "sentences.txt"


def _whole_ranking(sentences, values, show, lowest):
    """The ranking written out plainly: every position sorted by value, ties in corpus order;
    words by mean, ties in the order they first occur."""
    sign = 1.0 if lowest else -1.0
    flat = sorted(((float(v), s, i) for s, vals in enumerate(values) for i, v in enumerate(vals)),
                  key=lambda x: sign * x[0])
    by = {}
    for sent, vals in zip(sentences, values):
        for w, v in zip(sent, vals):
            by.setdefault(w, []).append(float(v))
    words = sorted(((sum(v) / len(v), len(v), w) for w, v in by.items()),
                   key=lambda x: sign * x[0])
    return [(v, s, i) for v, s, i in flat[:show]], [(w, m, n) for m, n, w in words[:show]]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(-3, 3), min_size=1, max_size=7), min_size=1, max_size=12),
       st.integers(1, 8), st.booleans(), st.lists(st.integers(1, 5), min_size=1, max_size=12))
def test_the_ranking_fed_in_batches_is_the_ranking_of_the_whole(rows, show, lowest, cuts):
    # few distinct values, so that ties are common; words drawn from a small vocabulary
    values = [np.asarray(r, dtype=np.float32) / 2 for r in rows]
    sentences = [[f"w{(7 * s + i) % 5}" for i in range(len(r))] for s, r in enumerate(rows)]
    top = UnitTop(show, lowest)
    start, k = 0, 0
    while start < len(rows):
        n = cuts[k % len(cuts)]
        top.add(start, sentences[start:start + n], values[start:start + n])
        start, k = start + n, k + 1
    positions, words = _whole_ranking(sentences, values, show, lowest)
    assert [(c.value, c.sentence, c.token) for c in top.contexts()] == positions
    assert top.words() == words
    assert top.positions == sum(len(r) for r in rows)
    whole = top_contexts(sentences, values, show, lowest)
    assert [(c.value, c.sentence, c.token) for c in whole] == positions
    assert word_means(sentences, values, show, lowest) == words


def test_a_context_holds_the_words_around_it():
    sent = "a b c d e f g h i j k l m n o".split()
    vals = np.zeros(len(sent), dtype=np.float32)
    vals[7] = 5.0
    (c,) = top_contexts([sent], [vals], 1, window=3)
    assert (c.word, c.left, c.right, c.sentence, c.token) == ("h", "e f g", "i j k", 0, 7)
    with pytest.raises(ValueError, match="sentence 4: 2 values for 3 words"):
        UnitTop(2).add(4, [["a", "b", "c"]], [np.zeros(2, np.float32)])
    top = UnitTop(2, words=False)
    top.add(0, [sent], [vals])
    with pytest.raises(ValueError, match="sentence 0 comes after sentence 0"):
        top.add(0, [sent], [vals])                       # the same positions twice
    assert top.words() == [] and top.positions == len(sent) and top.contexts()[0].word == "h"


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    """An index of 120 reference sentences, one per line (as the file reader reads them)."""
    folder = tmp_path_factory.mktemp("units-index")
    text = folder / "c.txt"
    text.write_text("\n".join(CORPUS.read_text("utf-8").splitlines()[:120]) + "\n", "utf-8")
    assert main(["index", str(text), "-o", str(folder / "ix"), *CK, "--layer", "1",
                 "--no-split-sentences", "--shard-size", "50"]) == 0
    return text, folder / "ix"


@pytest.fixture(scope="module")
def model():
    from elmo_engine.model.checkpoint import load_checkpoint

    return load_checkpoint(TINY)


def test_the_scan_of_an_index_is_the_unit_over_its_sentences(index, model):
    _, folder = index
    ix = CorpusIndex(folder)
    try:
        m = ix.manifest
        sentences = ix.sentences(0, m.n_sentences)
        assert len(sentences) == m.n_sentences == 120 and sum(map(len, sentences)) == m.n_tokens
        assert ix.sentences(118, 50) == sentences[118:] and ix.sentences(500, 3) == []
        values = unit_values(model, sentences, 1, 1, StateKind.C, 5)
        seen = []
        low, high = UnitTop(15, lowest=True), UnitTop(4)              # both in one pass
        scan = scan_units(model, ix.sentence_source(), 1, 1, StateKind.C, {5: [low, high]},
                          task=TaskState(lambda done, total, msg: seen.append((done, total))))
        assert (scan.sentences, scan.tokens, scan.truncated) == (120, m.n_tokens, False)
        assert [(c.value, c.sentence, c.token) for c in low.contexts()] == \
            [(c.value, c.sentence, c.token) for c in top_contexts(sentences, values, 15, True)]
        assert low.words() == word_means(sentences, values, 15, True)
        assert high.contexts() == top_contexts(sentences, values, 4)
        assert seen[-1] == (m.n_tokens, m.n_tokens) and len(seen) == 2     # a batch of 64
        # the first words only, whole sentences, as a file is read
        first = UnitTop(5)
        cut = scan_units(model, ix.sentence_source(), 1, 1, StateKind.C, {5: [first]},
                         max_tokens=100)
        lengths = np.cumsum([len(s) for s in sentences])
        n = int(np.searchsorted(lengths, 100)) + 1                   # the sentence reaching 100
        assert (cut.sentences, cut.tokens, cut.truncated) == (n, int(lengths[n - 1]), True)
        assert first.positions == cut.tokens and all(c.sentence < n for c in first.contexts())
        # cancelled between batches
        state = TaskState(lambda done, total, msg: state.cancel())
        with pytest.raises(CancelledError):
            scan_units(model, ix.sentence_source(), 1, 0, StateKind.C, {5: [UnitTop(5)]},
                       task=state)
        with pytest.raises(InputError, match="unit 4096: c has units"):
            scan_units(model, ix.sentence_source(), 1, 0, StateKind.C,
                       {5: [UnitTop(5)], 4096: [UnitTop(5)]})
        with pytest.raises(InputError, match="no unit"):
            scan_units(model, ix.sentence_source(), 1, 0, StateKind.C, {})
        with pytest.raises(InputError, match=f"at most {MAX_SCAN_UNITS}"):
            scan_units(model, ix.sentence_source(), 1, 0, StateKind.C,
                       {u: [UnitTop(1)] for u in range(MAX_SCAN_UNITS + 1)})
    finally:
        ix.close()


def test_several_units_in_one_scan_rank_as_each_alone(index, model):
    # one run of the model feeds each unit's own rankings: the same as each unit scanned alone,
    # whatever the order the units are given in
    _, folder = index
    ix = CorpusIndex(folder)
    try:
        sentences = ix.sentences(0, ix.manifest.n_sentences)
        units = (11, 3, 14)                            # h has 16 units
        tops = {u: [UnitTop(6), UnitTop(4, lowest=True)] for u in units}
        scan = scan_units(model, ix.sentence_source(), 0, 1, StateKind.H, tops)
        assert scan.tokens == ix.manifest.n_tokens
        for u in units:
            values = unit_values(model, sentences, 0, 1, StateKind.H, u)
            high, low = tops[u]
            assert high.contexts() == top_contexts(sentences, values, 6)
            assert low.contexts() == top_contexts(sentences, values, 4, lowest=True)
            assert high.words() == word_means(sentences, values, 6)
            assert high.positions == low.positions == scan.tokens
        # the units really differ (a mix-up of columns would make them equal)
        assert len({tuple(c.value for c in tops[u][0].contexts()) for u in units}) == 3
    finally:
        ix.close()


def test_several_units_values_in_one_run_are_each_units_own(index, model):
    # units_values: one (n, U) array per sentence, its columns each unit's unit_values, in the
    # order given; the bounds as the scan's
    _, folder = index
    ix = CorpusIndex(folder)
    try:
        sentences = ix.sentences(0, 70)                 # two batches of the model
    finally:
        ix.close()
    units = (30, 2, 17)
    together = units_values(model, sentences, 1, 0, StateKind.C, units)
    assert [v.shape for v in together] == [(len(s), 3) for s in sentences]
    assert all(v.dtype == np.float32 and v.flags.owndata for v in together)
    for j, u in enumerate(units):
        alone = unit_values(model, sentences, 1, 0, StateKind.C, u)
        assert all(np.array_equal(a, t[:, j]) for a, t in zip(alone, together))
    assert not np.allclose(np.concatenate(together)[:, 0], np.concatenate(together)[:, 1])
    with pytest.raises(InputError, match="no unit"):
        units_values(model, sentences, 1, 0, StateKind.C, ())
    with pytest.raises(InputError, match=f"at most {MAX_SCAN_UNITS}"):
        units_values(model, sentences, 1, 0, StateKind.C, range(MAX_SCAN_UNITS + 1))
    with pytest.raises(InputError, match="unit 4096: c has units"):
        units_values(model, sentences, 1, 0, StateKind.C, (1, 4096))


def test_top_over_an_index_prints_what_the_file_gives(index, capsys):
    text, folder = index
    argv = ["units", "top", "--layer", "1", "--direction", "backward", "--state", "h",
            "--unit", "2", "--show", "8", *CK, "--json"]
    assert main([*argv, str(text)]) == 0
    from_file = json.loads(capsys.readouterr().out)
    assert main([*argv, "--index", str(folder)]) == 0
    out = capsys.readouterr()
    from_index = json.loads(out.out)
    assert from_index["top"] == from_file["top"] and from_index["words"] == from_file["words"]
    assert from_index["positions"] == from_file["positions"] == from_file["corpus"]["tokens"]
    assert from_index["corpus"] == {"index": str(folder), "sentences": 120,
                                    "tokens": from_file["corpus"]["tokens"], "truncated": False}
    assert main([*argv, "--index", str(folder), "--max-tokens", "200"]) == 0
    out = capsys.readouterr()
    cut = json.loads(out.out)
    assert cut["corpus"]["truncated"] and 200 <= cut["corpus"]["tokens"] < 260
    assert f"note: read the first {cut['corpus']['tokens']:,} words" in out.err


def test_top_with_several_units_gives_each_units_own_table(index, capsys):
    text, folder = index
    argv = ["units", "top", "--layer", "1", "--state", "c", "--show", "5", *CK, "--json",
            "--index", str(folder)]
    alone = {}
    for unit in (9, 2):
        assert main([*argv, "--unit", str(unit)]) == 0
        alone[unit] = json.loads(capsys.readouterr().out)
    assert main([*argv, "--unit", "9,2"]) == 0
    both = json.loads(capsys.readouterr().out)
    assert [u["unit"] for u in both["units"]] == [9, 2]            # in the order asked
    for one in both["units"]:
        assert one["top"] == alone[one["unit"]]["top"] and len(one["top"]) == 5
        assert one["words"] == alone[one["unit"]]["words"]
    assert both["positions"] == alone[9]["positions"] and both["corpus"] == alone[9]["corpus"]
    assert "unit" not in both and "top" not in both
    assert main([*argv[:-3], "--unit", "9,2", str(text)]) == 0        # a file; as text
    out = capsys.readouterr().out
    assert out.index("unit 9 of c, layer 1 forward") < out.index("unit 2 of c, layer 1 forward")
    assert out.count("words by mean value:") == 2


@pytest.mark.parametrize("units, message", [
    ("3,3", "--unit: unit 3 is given twice"),
    ("3,x", "--unit must be comma-separated integers"),
    (",", "--unit needs a unit"),
    ("-1", "--unit: -1 is below 0"),
    ("2,64", "--unit 64: c has units 0 … 63"),
    (",".join(map(str, range(MAX_SCAN_UNITS + 1))), f"one run ranks at most {MAX_SCAN_UNITS}"),
])
def test_bad_units_are_one_line_before_the_model(index, capsys, monkeypatch, units, message):
    import elmo_engine.cli.units as cli_units

    def no_model(args):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(cli_units, "_load_model", no_model)
    text, _ = index
    assert main(["units", "top", str(text), "--unit", units, *CK]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


BAD_OPTIONS = [
    ([], "give a sentence file or --index FOLDER (one of them)"),
    (["FILE", "--index", "IX"], "give a sentence file or --index FOLDER (one of them)"),
    (["FILE", "--max-tokens", "9"], "--max-tokens goes with --index"),
    (["--index", "IX", "--pretokenized"], "--pretokenized does not go with --index"),
    (["--index", "IX", "--max-tokens", "0"], "--max-tokens"),
    (["--index", "NOWHERE"], "NOWHERE"),
]


@pytest.mark.parametrize("command, extra, message", [
    (c, e, m) for c in ("top", "pattern") for e, m in BAD_OPTIONS
    if not (c == "pattern" and "--pretokenized" in e)])   # the query's switch there
def test_bad_options_are_one_line(index, tmp_path, capsys, command, extra, message):
    text, folder = index
    if command == "pattern":
        extra = [*extra, "--sentence", "a bank .", "--span", "1:2"]
    extra = [{"FILE": str(text), "IX": str(folder), "NOWHERE": str(tmp_path / "none")}.get(a, a)
             for a in extra]
    message = message.replace("NOWHERE", str(tmp_path / "none"))
    try:
        code = main(["units", command, *(["--unit", "1"] if command == "top" else []), *CK,
                     *extra])
    except SystemExit as e:                     # a value the parser refuses
        code = e.code
    assert code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_a_damaged_sentence_table_is_one_line_naming_it(index, tmp_path, capsys):
    import shutil
    import sqlite3

    _, folder = index
    copy = tmp_path / "ix"
    shutil.copytree(folder, copy)
    db = sqlite3.connect(copy / "tokens.sqlite")
    db.execute("DELETE FROM sentences WHERE id = 70")
    db.commit()
    db.close()
    assert main(["units", "top", "--unit", "1", *CK, "--index", str(copy)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert "tokens.sqlite" in err[-1] and "sentence 70 is missing" in err[-1]


def test_the_pattern_search_over_an_index_is_the_search_over_its_sentences(index, model):
    from elmo_engine.analysis.units.pattern import find_pattern

    _, folder = index
    ix = CorpusIndex(folder)
    try:
        held = ix.sentences(0, ix.manifest.n_sentences)
        query = "The bank of the river was steep .".split()
        args = (model, query, (2, 3), 0.05, 1, 0, StateKind.C)
        want = find_pattern(*args, held, show=12)
        got = find_pattern(*args, ix.sentence_source(), show=12)
        assert got.matches == want.matches and len(got.matches) == 12
        assert (got.spans, got.sentences, got.tokens, got.truncated) == \
            (want.spans, 120, ix.manifest.n_tokens, False)
        cut = find_pattern(*args, ix.sentence_source(), show=12, max_tokens=300)
        assert cut.truncated and 300 <= cut.tokens < 400 and cut.sentences < 120
        assert all(m.sentence < cut.sentences for m in cut.matches)
        assert cut.matches == find_pattern(*args, held[:cut.sentences], show=12).matches
    finally:
        ix.close()


def test_pattern_over_an_index_prints_what_the_file_gives(index, capsys):
    text, folder = index
    argv = ["units", "pattern", "--sentence", "The bank of the river was steep .", "--span",
            "2:3", "--threshold", "0.05", "--layer", "1", "--show", "6", *CK, "--json"]
    assert main([*argv, str(text)]) == 0
    from_file = json.loads(capsys.readouterr().out)
    assert main([*argv, "--index", str(folder)]) == 0
    from_index = json.loads(capsys.readouterr().out)
    assert from_index["matches"] == from_file["matches"] and len(from_file["matches"]) == 6
    assert from_index["corpus"] == {"index": str(folder), "sentences": 120,
                                    "tokens": from_file["corpus"]["tokens"], "truncated": False}
    # --pretokenized splits the query on spaces; it goes with --index (the query is not)
    assert main([*argv, "--index", str(folder), "--pretokenized", "--max-tokens", "50"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["corpus"]["truncated"] and "note: read the first" in out.err
