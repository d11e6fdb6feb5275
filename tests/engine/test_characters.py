"""The Characters analysis (issue 41): the word lab's winning n-grams against a brute-force max
over every window, the highway gates rebuilding layer 0, the filter atlas against the max-pool
of every vocabulary word, and perturbation sweeps (deterministic, shaped right)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from support import FIXTURES
from elmo_engine.analysis.characters import atlas as atlas_mod
from elmo_engine.analysis.characters import perturb, windows, word_lab
from elmo_engine.errors import InputError
from elmo_engine.model.chars import EOW_CHAR, char_ids_for_types
from elmo_engine.model.checkpoint import load_checkpoint
from elmo_engine.resources import demo_checkpoint_path

pytestmark = pytest.mark.usefixtures("torch_one_thread")

CHECKPOINTS = {"allennlp": FIXTURES / "allennlp", "bilm-tf": FIXTURES / "bilm-tf" / "model",
               "demo": None}
WORDS = ["blorft", "recieve", "bank", "Bank", "AntidisestablishmentariaNism" * 2, "a", "42nd",
         "U.S.", "naïve", "Москва", "東京", "🙂👍", "don't", "unhappiness", "x" * 48, "x" * 49]


@pytest.fixture(scope="module", params=list(CHECKPOINTS))
def model(request):
    path = CHECKPOINTS[request.param] or demo_checkpoint_path()
    return load_checkpoint(path)


def brute_force(model, word: str):
    """Every filter's max over every window, in float64 with plain loops over positions:
    ``(max values (N,), values (N, positions) per filter as a list)``."""
    cnn = model.char_cnn
    emb = cnn.char_embed.detach().double().numpy()
    table = np.vstack([np.zeros((1, emb.shape[1])), emb])                   # (262, C)
    ids = char_ids_for_types([word], cnn.opts.max_characters_per_token)[0]
    best, all_values = [], []
    for w, b in zip(cnn.conv_w, cnn.conv_b):
        w = w.detach().double().numpy()[0]                                  # (width, C, k)
        b = b.detach().double().numpy()
        width = w.shape[0]
        vals = np.array([np.einsum("ic,ick->k", table[ids[p:p + width]], w) + b
                         for p in range(len(ids) - width + 1)])             # (positions, k)
        best.append(vals.max(0))
        all_values += list(vals.T)
    return np.concatenate(best), all_values


def test_winning_ngram_is_the_brute_force_max_of_every_filter(model):
    f = windows.filters_of(model.char_cnn)
    widths = f.widths()
    reports = word_lab.analyse(f, WORDS)
    for r in reports:
        best, per_filter = brute_force(model, r.word)
        scale = max(1.0, float(np.abs(best).max()))
        assert np.abs(r.pooled - best).max() <= 1e-5 * scale, r.word
        for j in range(f.n_filters):                  # the winner's own value is the max
            assert abs(per_filter[j][r.positions[j]] - best[j]) <= 1e-5 * scale, (r.word, j)
        hits = r.top_filters(f, 5)
        assert [h.value for h in hits] == sorted((h.value for h in hits), reverse=True)
        for h in hits:
            ids = r.char_ids[h.position:h.position + h.width]
            assert h.ngram == windows.render_ids(ids) and len(ids) == widths[h.filter]


def test_highway_gates_rebuild_layer_0(model):
    f = windows.filters_of(model.char_cnn)
    reports = word_lab.analyse(f, WORDS)
    ids = torch.from_numpy(char_ids_for_types(WORDS, model.opts.max_characters_per_token))
    with torch.inference_mode():
        ref = model.token_vectors(ids).numpy()                              # (n, P)
    for r, want in zip(reports, ref):
        x = r.highway[0].x_in
        assert np.allclose(x, np.maximum(r.pooled, 0.0), atol=1e-6)       # relu(max-pool)
        assert len(r.highway) == model.opts.n_highway
        for layer, nxt in zip(r.highway, r.highway[1:]):
            assert np.array_equal(layer.output(), nxt.x_in)
            assert 0.0 <= layer.transform_share <= 1.0
            assert layer.carry_share == pytest.approx(1.0 - layer.transform_share)
        x = r.highway[-1].output()
        if f.projection is not None:
            x = x @ f.projection[0].numpy() + f.projection[1].numpy()
        tol = 4 * np.finfo(np.float32).eps * max(1.0, float(np.abs(want).max()))
        assert np.abs(x - want).max() <= tol * 8, r.word
        assert np.abs(r.vector - want).max() <= tol * 8, r.word


def test_character_ids_marks_and_truncation():
    f = windows.filters_of(load_checkpoint(FIXTURES / "allennlp").char_cnn)
    short, long48, long49 = word_lab.analyse(f, ["blorft", "x" * 48, "x" * 49])
    assert short.shown_ids == "⟨blorft⟩" and not short.truncated and short.n_bytes == 6
    assert long48.shown_ids == "⟨" + "x" * 48 + "⟩" and not long48.truncated
    assert long49.shown_ids == long48.shown_ids and long49.truncated
    assert windows.render_ids([259, 0xC3 + 1, 0xAF + 1, 260, 261]) == "⟨ï⟩·"
    assert windows.render_ids([0xC3 + 1]) == "\\xc3"
    assert windows.query_ids("-ness") == [ord(c) + 1 for c in "ness"] + [EOW_CHAR]
    assert windows.query_ids("un-")[0] == 259 and windows.query_ids("ab") == [98, 99]
    with pytest.raises(InputError, match="not a word"):
        word_lab.analyse(f, ["two words"])


def test_vocabulary_norms_and_neighbours():
    f = windows.filters_of(load_checkpoint(demo_checkpoint_path()).char_cnn)
    vocab = word_lab.Vocabulary.from_words(f, ["bank", "banks", "river", "money", "bank"], "t")
    assert vocab.words == ["bank", "banks", "river", "money"]
    (r,) = word_lab.analyse(f, ["bank"], vocab, neighbours=2)
    assert [w for w, _ in r.neighbours][0] != "bank" and len(r.neighbours) == 2
    near = vocab.nearest(r.vector, 1)
    assert near[0][0] == "bank" and near[0][1] == pytest.approx(1.0, abs=1e-5)
    assert r.norm_percentile == 100.0 * (vocab.norms <= r.norm + 1e-9).mean()


def test_a_vocabulary_is_bounded_before_it_allocates_and_reads_gzip(tmp_path, monkeypatch):
    """An attack pass: 2,000,000 words (inside the file's limits) took 9 GB, three (V, P)
    arrays. One is held now, the unit vectors, and the vectors' size is checked first; a
    vocab.txt.gz reads as the other readers read gzip."""
    import gzip

    f = windows.filters_of(load_checkpoint(demo_checkpoint_path()).char_cnn)
    words = ["bank", "banks", "river", "money", "teller"]
    vocab = word_lab.Vocabulary.from_words(f, words)
    assert vocab._unit.dtype == np.float32 and not hasattr(vocab, "_vectors")
    np.testing.assert_allclose(np.linalg.norm(vocab._unit, axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(vocab.vectors, word_lab.Vocabulary(
        words, vocab.vectors.copy()).vectors, atol=1e-6)
    given = vocab.vectors.copy()
    word_lab.Vocabulary(words, given)                         # not own: the caller's array kept
    np.testing.assert_array_equal(given, vocab.vectors)
    monkeypatch.setattr(word_lab, "MAX_VOCAB_VECTOR_BYTES", 4 * f.projection[0].shape[1] * 4)
    with pytest.raises(InputError, match="the vectors of 5 known words .* over the bound"):
        word_lab.Vocabulary.from_words(f, words)
    packed = tmp_path / "vocab.txt.gz"
    packed.write_bytes(gzip.compress("<S>\nbank 12\nriver 3\n".encode()))
    assert word_lab.read_vocabulary(packed) == ["bank", "river"]


def test_atlas_top_ngram_is_the_vocabulary_max_pool(model):
    f = windows.filters_of(model.char_cnn)
    vocab = ["blorft", "receive", "Bank", "U.S.", "42nd", "naïve", "unhappiness", "a", "xyz",
             "kindness", "Москва"]
    at = atlas_mod.Atlas.build(f, vocab, top=5)
    pooled, _ = word_lab.pool(f, char_ids_for_types(vocab, f.max_chars))    # (V, N)
    for e in at.entries():
        want = pooled[:, e.filter].max()
        assert e.ngrams[0][1] == pytest.approx(want, abs=1e-5), e.filter
        values = [v for _, v, _ in e.ngrams]
        assert values == sorted(values, reverse=True) and len(values) == 5
    for t in at.tables:                               # each window sits in its example word
        for i in t.top[:, 0]:
            word_ids = char_ids_for_types([vocab[t.first_word[i]]], f.max_chars)
            assert (windows.all_windows(word_ids, t.width)[0] == t.windows[i]).all(1).any()
    # brute force on one bank: every distinct window scored, the best 5 kept
    t = at.tables[-1]
    width = t.width
    all_w = windows.all_windows(char_ids_for_types(vocab, f.max_chars), width).reshape(-1, width)
    distinct = np.unique(all_w, axis=0)
    assert len(t.windows) == len(distinct)
    vals = f.window_values(len(at.tables) - 1, distinct).numpy()
    assert np.allclose(np.sort(vals, 0)[::-1][:5].T, t.top_values, atol=1e-5)


def test_atlas_search_categories_and_tsv():
    f = windows.filters_of(load_checkpoint(demo_checkpoint_path()).char_cnn)
    words = word_lab.reference_words(limit=3000)
    at = atlas_mod.Atlas.build(f, words, top=10)
    hits = at.search("-ness", limit=5)
    assert len(hits) == 5 and hits[0][1] >= hits[-1][1]
    assert all(("ness" in g or g in "ness⟩") for _, _, g, _ in hits)
    counts = at.category_counts()
    assert sorted(counts) == [1, 2, 3, 4, 5]
    assert [sum(c.values()) for _, c in sorted(counts.items())] == [32, 32, 64, 128, 256]
    assert sum(c[atlas_mod.Category.CAPITALS] for c in counts.values()) > 0
    tsv = at.to_tsv(top=3).splitlines()
    assert len(tsv) == 513 and tsv[0].startswith("filter\twidth\tcategory")
    assert all(len(line.split("\t")) == 9 for line in tsv)
    assert len(at.entries(width=2)) == 32
    with pytest.raises(InputError, match="--width 9"):
        at.entries(width=9)
    up = [np.array([259, ord("A") + 1, 98]), np.array([ord("B") + 1, 98, 99])]
    shares = atlas_mod.category_shares(up)
    assert shares[atlas_mod.Category.CAPITALS] == 1.0 and shares[atlas_mod.Category.PREFIX] == 0.5
    assert atlas_mod.categorise(up, shares) == atlas_mod.Category.CAPITALS


def test_variants_are_deterministic_and_of_every_type():
    a = perturb.variants("receive", per_kind=4, seed=0)
    assert a == perturb.variants("receive", per_kind=4, seed=0)
    assert a != perturb.variants("receive", per_kind=4, seed=1)
    kinds = {v.kind for v in a}
    assert kinds == set(perturb.Kind)                  # "receive" has -s? no: re- and -ive…
    for v in a:
        assert v.text != "receive" and " " not in v.text
        if v.kind == perturb.Kind.DELETE_1:
            assert len(v.text) == 6
        if v.kind == perturb.Kind.TRANSPOSE_1:
            assert sorted(v.text) == sorted("receive")
        if v.kind == perturb.Kind.CASE:
            assert v.text.lower() == "receive"
    assert max(sum(v.kind == k for v in a) for k in perturb.Kind) <= 4


def test_sweep_is_deterministic_and_shaped_right():
    from elmo_engine.embed.embedder import Embedder

    emb = Embedder(load_checkpoint(FIXTURES / "allennlp"), device="cpu")
    sents = [["the", "bank", "of", "the", "river"], ["a", "bank", "lends", "money"]]
    s1 = perturb.sweep(emb, sents, "bank", per_kind=2)
    emb.clear_cache()
    s2 = perturb.sweep(emb, sents, "bank", per_kind=2)
    assert s1.variants == s2.variants and np.array_equal(s1.cosines, s2.cosines)
    n_layers = emb.opts.n_output_layers
    assert s1.cosines.shape == (len(s1.variants), 2, n_layers, 3)
    assert np.all(s1.cosines <= 1.0 + 1e-5) and np.all(s1.cosines >= -1.0 - 1e-5)
    # layer 0: the variant's token vector against the word's, whatever the sentence
    tv = emb.token_vectors(["bank"] + [v.text for v in s1.variants])
    want = tv[1:] @ tv[0] / np.linalg.norm(tv[1:], axis=1) / np.linalg.norm(tv[0])
    assert np.allclose(s1.cosines[:, 0, 0, 0], want, atol=1e-5)
    assert np.allclose(s1.cosines[:, 1, 0, 0], want, atol=1e-5)
    summary = s1.summary()
    assert set(summary) == {v.kind for v in s1.variants}
    k = s1.variants[0].kind
    rows = [i for i, v in enumerate(s1.variants) if v.kind == k]
    assert np.allclose(summary[k], s1.cosines[rows].mean((0, 1)), atol=1e-6)
    doc = s1.to_dict()
    assert doc["positions"] == [1, 1] and len(doc["variants"]) == len(s1.variants)
    corpus = perturb.sweep_corpus(emb, sents + [["no", "match"]], ["bank", "absent"],
                                  per_word=1, per_kind=1)
    assert [s.word for s in corpus] == ["bank"] and corpus[0].cosines.shape[1] == 1
    with pytest.raises(InputError, match="occurs 0 time"):
        perturb.sweep(emb, [["no", "match"]], "bank")


def test_figures_draw_the_filter_map_and_the_perturbation_chart(tmp_path):
    from elmo_engine.io import figures
    from elmo_engine.io.figures import characters as char_figures

    fig = char_figures.filter_map_figure({1: {"capitals": 3, "word-internal": 5},
                                          2: {"suffix": 2, "digits": 1}}, title="t")
    ax = fig.axes[0]
    assert len(ax.patches) == 4 * 2 and ax.get_xlabel().startswith("filter width")
    fig2 = char_figures.perturbation_figure({"delete 1": [[0.7] * 3, [0.8, 0.79, 0.81],
                                                          [0.9, 0.85, 0.95]],
                                             "case": [[0.4] * 3, [0.3] * 3, [0.35] * 3]})
    heights = sorted(round(p.get_height(), 2) for p in fig2.axes[0].patches)
    assert heights == sorted([0.7, 0.79, 0.81, 0.85, 0.95, 0.4, 0.3, 0.3, 0.35, 0.35])
    written = figures.save(fig2, tmp_path / "perturb.png")
    assert written[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_vocabulary_by_the_model_is_the_vocabulary_by_the_filters(model):
    f = windows.filters_of(model.char_cnn)
    words = WORDS + ["river", "money"]
    a = word_lab.Vocabulary.from_words(f, words)
    b = word_lab.Vocabulary.from_words(f, words, char_cnn=model.char_cnn, chunk=5)
    assert a.words == b.words and np.allclose(a.vectors, b.vectors, atol=1e-5)


def test_a_vocabulary_by_the_embedder_reports_progress_and_honours_cancel():
    from elmo_engine.embed.embedder import Embedder
    from elmo_engine.errors import CancelledError
    from elmo_engine.progress import TaskState

    model = load_checkpoint(FIXTURES / "allennlp")
    emb = Embedder(model, device="cpu")
    words = WORDS + ["river", "money", "river", "two words"]
    seen = []
    v = word_lab.Vocabulary.from_embedder(emb, words, "mine", chunk=4,
                                          state=TaskState(lambda d, t, m: seen.append((d, t))))
    assert v.words == list(dict.fromkeys(WORDS + ["river", "money"])) and v.source == "mine"
    ref = word_lab.Vocabulary.from_words(windows.filters_of(model.char_cnn), words)
    assert np.allclose(v.vectors, ref.vectors, atol=1e-5)
    assert [d for d, _ in seen] == list(range(0, len(v.words), 4)) + [len(v.words)]
    state = TaskState()
    state.cancel()
    with pytest.raises(CancelledError):
        word_lab.Vocabulary.from_embedder(emb, words, state=state)


def test_a_sweep_honours_cancel():
    from elmo_engine.embed.embedder import Embedder
    from elmo_engine.errors import CancelledError
    from elmo_engine.progress import TaskState

    emb = Embedder(load_checkpoint(FIXTURES / "allennlp"), device="cpu")
    state = TaskState()
    state.cancel()
    with pytest.raises(CancelledError):
        perturb.sweep(emb, [["the", "bank"]], "bank", per_kind=1, state=state)
    seen = []
    perturb.sweep(emb, [["the", "bank"]], "bank", per_kind=1,
                  state=TaskState(lambda d, t, m: seen.append((d, t))))
    assert seen and seen[-1][0] == seen[-1][1]


def test_the_report_holds_the_characters_views_word_lab_and_sweep(tmp_path):
    """``export report`` of a workspace whose Characters view names words and a sentence: the
    word-lab table (a nonce word and a typo) and the perturbation table and figure, computed by
    the view's own functions."""
    from elmo_engine.analysis.characters.report import characters_part
    from elmo_engine.analysis.characters.perturb import sweep
    from elmo_engine.analysis.report import export_report
    from elmo_engine.embed.embedder import Embedder
    from elmo_engine.io.figures import FigureStyle
    from elmo_engine.io.workspace_file import WorkspaceData
    from elmo_engine.model.checkpoint import load_checkpoint
    from elmo_engine.resources import demo_checkpoint_path

    emb = Embedder(load_checkpoint(demo_checkpoint_path()), device="cpu")
    state = {"words": "blorft recieve", "sentence": "He sat on the bank of the river .",
             "word": "bank"}
    data = WorkspaceData(sentences=["He sat on the bank of the river ."],
                         views={"characters": state})
    spec, files = export_report(data, "w.json", emb, tmp_path / "rep",
                                FigureStyle(formats=("png",)))
    tables = {t.name: t for t in spec.tables}
    words = tables["characters_words"].rows
    assert [r["word"] for r in words] == ["blorft", "recieve"]
    assert words[0]["characters"].startswith("⟨blorft") and words[0]["nearest known words"]
    sweep_rows = tables["characters_perturbation"].rows
    expected = sweep(emb, [state["sentence"].split()], "bank", 4).summary()
    assert {r["perturbation"] for r in sweep_rows} == {k.value for k in expected}
    for r in sweep_rows:
        m = next(v for k, v in expected.items() if k.value == r["perturbation"])
        assert r["layer 0"] == pytest.approx(float(m[0, 0]), abs=1e-4)
        assert r["layer 2 backward"] == pytest.approx(float(m[2, 2]), abs=1e-4)
    assert (tmp_path / "rep" / "figures" / "characters_perturbation.png").is_file()
    assert (tmp_path / "rep" / "tables" / "characters_words.csv").is_file()
    assert characters_part(emb, {"sentence": "no such word", "word": "bank"}, None,
                           FigureStyle()).notes               # a word not in its sentence
    # a pretokenized workspace: the sentence is split on spaces, as the view splits it
    pre = {"sentence": "They can't bank on it .", "word": "can't"}
    assert characters_part(emb, pre, None, FigureStyle()).notes       # typed text: ca n't
    part = characters_part(emb, pre, None, FigureStyle(), tokenization="whitespace")
    expected = sweep(emb, [pre["sentence"].split()], "can't", 4).summary()
    row = next(r for r in part.tables[0].rows if r["perturbation"] == "delete 1")
    m = next(v for k, v in expected.items() if k.value == "delete 1")
    assert not part.notes and row["layer 0"] == pytest.approx(float(m[0, 0]), abs=1e-4)


def test_the_report_uses_the_views_saved_vocabulary(tmp_path):
    """The word lab in a report takes its known words where the saved view took them: a file,
    the model's vocab.txt; one that cannot be read is a note, and the reference corpus's."""
    from elmo_engine.analysis.characters.report import characters_part
    from elmo_engine.embed.embedder import Embedder

    emb = Embedder(load_checkpoint(FIXTURES / "allennlp"), device="cpu")
    vocab = ["river", "rivers", "bank", "money", "stone", "water"]
    f = tmp_path / "words.txt"
    f.write_text("\n".join(vocab) + "\n", encoding="utf-8")
    state = {"words": "blorft recieve", "vocabulary": "file", "vocabulary_file": str(f)}
    part = characters_part(emb, state, None, None)
    rows = part.tables[0].rows
    near = [n.rsplit(" ", 1)[0] for r in rows for n in r["nearest known words"].split(", ")]
    assert len(near) == 10 and set(near) <= set(vocab) and not part.notes
    assert f"6 known words ({f})" in part.tables[0].caption
    state["vocabulary_file"] = str(tmp_path / "absent.txt")
    part = characters_part(emb, state, None, None)
    assert len(part.notes) == 1 and "absent.txt" in part.notes[0]
    assert "11,502 known words (the reference corpus's word types)" in part.tables[0].caption
    # the model's vocab.txt: the vendored checkpoint has none; the bundled model has one
    assert word_lab.model_vocabulary_file(emb.model.info.options_path) is None
    demo = word_lab.model_vocabulary_file(demo_checkpoint_path() / "options.json")
    words, source = word_lab.known_words("model", "", demo_checkpoint_path() / "options.json")
    assert demo is not None and source == "the model's vocab.txt" and len(words) == 24997
    assert words[:2] == [",", "the"]                          # <S>, </S>, <UNK> skipped
    with pytest.raises(InputError, match="no vocab.txt"):
        word_lab.known_words("model", "", emb.model.info.options_path)
    with pytest.raises(InputError, match="unknown vocabulary choice"):
        word_lab.known_words("web", "")
