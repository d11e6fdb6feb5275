"""The Characters view on the tiny checkpoint (issue 41): the word lab, the atlas and the sweep
show the engine's numbers, a search lists the filters, a bad sweep word is one inline message,
the panel's state round-trips and its exports are files; the known words come from the
vocabulary the user picks (a file, the model's vocab.txt) and the nonce word's nearest
occurrences per layer from a corpus index (the Corpus view's, or a folder)."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pytestqt")

from elmo_engine.analysis.characters import perturb
from elmo_engine.analysis.characters.windows import filters_of
from elmo_engine.analysis.characters.word_lab import analyse
from elmo_explorer.views.characters import export
from elmo_explorer.views.characters.controller import CharactersPanel
from elmo_explorer.views.characters.model import IndexSource, VocabSource

pytestmark = [pytest.mark.gui, pytest.mark.usefixtures("torch_one_thread")]


@pytest.fixture
def panel(qtbot, ws, app_settings_dir):
    p = CharactersPanel(ws)                     # the model is loaded: every job starts now
    qtbot.addWidget(p)
    qtbot.waitUntil(lambda: bool(p.is_ready() and p.model.lab and p.model.atlas and p.model.sweep
                                 and (p.model.nonce or p.model.nonce_problem)),
                    timeout=120000)
    return p


def test_the_view_shows_the_engines_numbers(qtbot, panel, ws):
    m = panel.model
    assert [d["word"] for d in m.lab] == ["blorft", "recieve", "Antidisestablishmentarianism"]
    want = analyse(filters_of(ws.embedder.model.char_cnn), ["recieve"])[0]
    got = m.lab[1]
    assert got["characters"] == "⟨recieve⟩" and got["norm"] == pytest.approx(want.norm, abs=1e-4)
    assert got["top_filters"][0]["value"] == pytest.approx(float(want.pooled.max()), abs=1e-4)
    assert len(got["neighbours"]) == 10 and m.vocabulary_size > 10000
    assert "recieve" in panel.view.lab_text.toPlainText()
    assert len(m.atlas) == sum(k for _, k in ws.embedder.opts.filters)
    assert panel.view.atlas_table.rowCount() == len(m.atlas)
    emb = ws.embedder
    tokens = m.sentence.split()
    ref = perturb.sweep(emb, [tokens], m.word, perturb.PER_KIND).to_dict()
    assert m.sweep["mean_per_type"] == ref["mean_per_type"]
    rows, _, _ = m.sweep_table()
    assert panel.view.mean_table.rowCount() == len(rows) == len(perturb.Kind)


def test_the_word_lab_says_which_words_it_left_out(qtbot, panel):
    """25 distinct words and a repeat: the lab keeps the first 20 (``chars`` takes any number)
    and says so in the status once the view's jobs are done."""
    from elmo_explorer.views.characters.model import MAX_WORDS

    panel.view.words_edit.setText(" ".join(f"w{i}" for i in range(25)) + " w0")
    panel.analyse()
    qtbot.waitUntil(lambda: panel.is_ready() and len(panel.model.lab) == MAX_WORDS,
                    timeout=60000)
    assert f"The lab shows the first {MAX_WORDS} of 25 words" in panel.view.status.text()
    assert "1 repeated word(s) once" in panel.view.status.text()


def test_search_width_and_a_bad_sweep_word(qtbot, panel):
    with qtbot.waitSignal(panel.results_changed, timeout=30000,
                          check_params_cb=lambda what: what == "search"):
        panel.view.search_edit.setText("-ing")
    hits = panel.model.search_hits
    assert hits and hits[0]["relative"] >= hits[-1]["relative"]
    assert not panel.view.atlas_table.isColumnHidden(3)
    panel.view.width_combo.setCurrentIndex(panel.view.width_combo.findData(2))
    qtbot.waitUntil(panel.is_ready, timeout=30000)
    assert {int(panel.view.atlas_table.item(r, 1).text())
            for r in range(panel.view.atlas_table.rowCount())} == {2}
    # the engine's every hit of width 2, as ``chars filters --search -ing --width 2``
    atlas = panel._atlas[1]
    want = [j for j, *_ in atlas.search("-ing", limit=None) if atlas.entry(j, 0).width == 2]
    assert [e["filter"] for e in panel.model.atlas_rows()] == want[:200]
    panel.view.word_edit.setText("absent")
    panel.run_sweep()
    qtbot.waitUntil(lambda: panel.is_ready() and "Characters:" in panel.view.status.text(),
                    timeout=30000)
    assert "'absent' is not a token" in panel.view.status.text()


def test_the_sweep_splits_its_sentence_as_settings_tokenization_says(qtbot, panel, ws):
    """Typed text: "can't" is two tokens, so the sweep says it is not one; Settings ▸
    Tokenization ▸ Pretokenized splits on spaces (as ``chars perturb --pretokenized``) and the
    sweep runs again by itself, on the engine's numbers for those tokens."""
    panel.view.sentence_edit.setText("They can't bank on it .")
    panel.view.word_edit.setText("can't")
    panel.run_sweep()
    qtbot.waitUntil(lambda: panel.is_ready() and "Characters:" in panel.view.status.text(),
                    timeout=30000)
    assert "'can't' is not a token" in panel.view.status.text()
    assert "Pretokenized" not in panel.view.status.text()
    with qtbot.waitSignal(panel.results_changed, timeout=30000,
                          check_params_cb=lambda what: what == "sweep"):
        ws.set_tokenization("whitespace", refresh=False)
    ref = perturb.sweep(ws.embedder, [["They", "can't", "bank", "on", "it", "."]], "can't",
                        4).to_dict()
    assert panel.model.sweep["mean_per_type"] == ref["mean_per_type"]
    panel.view.word_edit.setText("it.")
    panel.run_sweep()
    qtbot.waitUntil(lambda: panel.is_ready() and "Characters:" in panel.view.status.text(),
                    timeout=30000)
    assert "split on spaces: Settings ▸ Tokenization is Pretokenized" in panel.view.status.text()


def test_new_words_state_and_exports(qtbot, panel, tmp_path):
    panel.view.words_edit.setText("teh 2nd")
    with qtbot.waitSignal(panel.results_changed, timeout=60000):
        panel.analyse()
    assert [d["word"] for d in panel.model.lab] == ["teh", "2nd"]
    state = panel.view_state()
    assert state["words"] == "teh 2nd"
    panel.view.words_edit.setText("x")
    panel.restore_view_state(state)
    assert panel.view.words_edit.text() == "teh 2nd"
    qtbot.waitUntil(panel.is_ready, timeout=60000)
    written = export.write_figure(panel.model, "perturb", tmp_path / "p.png")
    assert written[0].read_bytes()[:4] == b"\x89PNG"
    export.write_tsv(panel._atlas[1].to_tsv(3), tmp_path / "a.tsv")
    lines = (tmp_path / "a.tsv").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1 + len(panel.model.atlas)
    assert [a.text() for a in panel.export_actions()] == [
        "Filter map (PNG/SVG/PDF)…", "Perturbation chart (PNG/SVG/PDF)…", "Filter atlas (TSV)…"]
    assert all(a.isEnabled() for a in panel.export_actions())
    assert np.isfinite([v for d in panel.model.lab for v in [d["norm"]]]).all()


def test_a_model_without_a_softmax_says_so_in_the_in_context_tab(panel):
    assert panel.model.nonce is None
    assert panel.model.nonce_problem.startswith("No predictions: this model has no usable softmax")
    assert "No predictions" in panel.view.nonce_text.toPlainText()


def test_nonce_word_in_context_on_the_bundled_model(qtbot, app_settings_dir):
    from elmo_engine.resources import demo_checkpoint_path
    from elmo_explorer.state.workspace import ModelSpec, Workspace

    w = Workspace()
    try:
        with qtbot.waitSignal(w.model_changed, timeout=60000):
            w.load_model(ModelSpec(str(demo_checkpoint_path()), device="cpu"))
        p = CharactersPanel(w)
        qtbot.addWidget(p)
        qtbot.waitUntil(lambda: bool(p.is_ready() and p.model.nonce), timeout=120000)
        d = p.model.nonce
        assert d["word"] == "blorft" and not d["in_vocabulary"] and d["position"] == 4
        assert len(d["forward_predictions"]) == 10 and len(d["both_agree"]) == 10
        assert [t for t, _ in p.model.nonce_columns()][0].startswith("layer 0")
        text = p.view.nonce_text.toPlainText()
        assert "outside the softmax's vocabulary" in text and d["both_agree"][0][0] in text
        p.view.nonce_word_edit.setText("river")
        with qtbot.waitSignal(p.results_changed, timeout=60000,
                              check_params_cb=lambda what: what == "nonce"):
            p.run_nonce()
        assert p.model.nonce["in_vocabulary"] and p.model.nonce["forward_rank"] >= 1
    finally:
        assert w.worker.shutdown(timeout_s=60)


def _wait_lab(qtbot, panel, trigger):
    with qtbot.waitSignal(panel.results_changed, timeout=60000,
                          check_params_cb=lambda what: what == "lab"):
        trigger()
    qtbot.waitUntil(panel.is_ready, timeout=60000)


def test_the_known_words_come_from_the_file_the_user_picks(qtbot, panel, tmp_path):
    words = ["river", "rivers", "blood", "bank", "money", "flower", "water", "stone", "tree",
             "house", "road", "field"]
    f = tmp_path / "my words.txt"
    f.write_text("</S>\n<S>\n<UNK>\n" + "\n".join(words) + "\n", encoding="utf-8")
    before = panel.model.lab
    assert panel.model.vocabulary_size > 10000 and not panel.view.vocab_combo.model().item(
        panel.view.vocab_combo.findData("model")).isEnabled()      # no vocab.txt beside it
    _wait_lab(qtbot, panel, lambda: panel.set_vocabulary(VocabSource.FILE, str(f)))
    m = panel.model
    assert m.vocabulary == str(f) and m.vocabulary_size == len(words)
    for d in m.lab:                           # every neighbour is a word of the file, ranked
        near = [n["word"] for n in d["neighbours"]]
        assert len(near) == 10 and set(near) <= set(words)
        assert near == [w for w, _ in _vocab_of(panel, words).nearest(
            np.asarray(_layer0(panel, d["word"])), 10, exclude=d["word"])]
    assert m.lab[0]["norm_percentile"] is not None and "12 words" in panel.view.vocab_info.text()
    assert panel.view.vocab_combo.currentText() == "File: my words.txt"
    state = panel.view_state()
    assert (state["vocabulary"], state["vocabulary_file"]) == ("file", str(f))
    assert before and m.lab != before
    # a bad file: one line in the status, the lab and the choice as they were
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"river\n\xff\xfe\n")
    shown = m.lab
    panel.set_vocabulary(VocabSource.FILE, str(bad))
    qtbot.waitUntil(lambda: panel.is_ready() and "Characters:" in panel.view.status.text(),
                    timeout=60000)
    assert f"{bad}:2: not valid UTF-8 (byte 0xFF at column 1)" in panel.view.status.text()
    assert "\n" not in panel.view.status.text() and m.lab == shown
    assert (m.vocab_source, m.vocab_file) == (VocabSource.FILE, str(f))
    # the model's vocab.txt, absent beside the tiny checkpoint: one line too
    panel.set_vocabulary(VocabSource.MODEL)
    assert "no vocab.txt beside it" in panel.view.status.text() and m.lab == shown
    # restored from the workspace: the file again
    panel.model.set_vocabulary(VocabSource.REFERENCE)
    panel.restore_view_state(state)
    qtbot.waitUntil(lambda: panel.is_ready() and panel.model.vocabulary == str(f), timeout=60000)
    # a workspace naming a file since removed: one line, kept once the jobs are done; the words
    # are computed with the last vocabulary that worked
    panel.restore_view_state(dict(state, words="teh", vocabulary_file=str(tmp_path / "gone.txt")))
    qtbot.waitUntil(lambda: panel.is_ready() and [d["word"] for d in m.lab] == ["teh"],
                    timeout=60000)
    assert "gone.txt" in panel.view.status.text() and m.vocabulary == str(f)
    assert (m.vocab_source, m.vocab_file) == (VocabSource.FILE, str(f))


def _vocab_of(panel, words):
    from elmo_engine.analysis.characters.word_lab import Vocabulary

    return Vocabulary(words, panel.ws.embedder.token_vectors(words))


def _layer0(panel, word):
    return panel.ws.embedder.token_vectors([word])[0]


def test_the_models_vocab_txt_beside_the_checkpoint(qtbot, tmp_path, app_settings_dir):
    from support import write_tiny_checkpoint
    from elmo_explorer.state.workspace import ModelSpec, Workspace

    folder = write_tiny_checkpoint(tmp_path / "ck", seed=3)
    (folder / "vocab.txt").write_text("<S>\n</S>\n<UNK>\nthe\nriver\nbank\nof\nsat\nhe\non\n.\n"
                                      "blood\nwater\nfield\n", encoding="utf-8")
    w = Workspace()
    try:
        with qtbot.waitSignal(w.model_changed, timeout=60000):
            w.load_model(ModelSpec(str(folder), device="cpu"))
        p = CharactersPanel(w)
        qtbot.addWidget(p)
        qtbot.waitUntil(lambda: bool(p.is_ready() and p.model.lab), timeout=120000)
        combo = p.view.vocab_combo
        assert combo.model().item(combo.findData("model")).isEnabled()
        _wait_lab(qtbot, p, lambda: p.set_vocabulary(VocabSource.MODEL))
        assert p.model.vocabulary == "the model's vocab.txt" and p.model.vocabulary_size == 11
        assert all(n["word"] in {"the", "river", "bank", "of", "sat", "he", "on", ".", "blood",
                                 "water", "field"}
                   for d in p.model.lab for n in d["neighbours"])
    finally:
        assert w.worker.shutdown(timeout_s=60)


INDEX_SENTENCES = ["He sat on the bank of the river .", "The river flows past the old mill .",
                   "She put her money in the bank .", "They walked along the river bank .",
                   "A blorft is not a word .", "The water of the river was cold ."]


def _build_index(corpus_dir, out, checkpoint):
    from elmo_engine.cli.main import main

    corpus = corpus_dir / "corpus.txt"
    corpus.write_text("\n".join(INDEX_SENTENCES) + "\n", encoding="utf-8")
    assert main(["index", str(corpus), "--out", str(out), "--checkpoint", str(checkpoint),
                 "--shard-size", "7", "--device", "cpu", "--layer", "0,1,2"]) == 0
    return out


def _wait_nonce(qtbot, panel, trigger):
    with qtbot.waitSignal(panel.results_changed, timeout=60000,
                          check_params_cb=lambda what: what == "nonce"):
        trigger()
    qtbot.waitUntil(panel.is_ready, timeout=60000)


def test_the_nonce_words_nearest_occurrences_in_a_corpus_index(qtbot, panel, ws, tmp_path,
                                                               tiny_checkpoint):
    from support import FIXTURES
    from elmo_engine.index.search import CorpusIndex, query_vectors
    from elmo_explorer.state.settings import AppSettings
    from elmo_explorer.views.corpus_index import default_index_folder

    assert panel.model.nonce_hits == {} and panel.model.index_source is IndexSource.CORPUS
    assert "none of this model yet" in panel.view.index_info.text()
    # the Corpus view's default index of this model, once built, is the default
    emb = ws.embedder
    folder = _build_index(tmp_path, default_index_folder(AppSettings().data_dir(), emb.checksum),
                          tiny_checkpoint)
    assert panel.corpus_index_folder() == folder
    _wait_nonce(qtbot, panel, panel.run_nonce)
    m = panel.model
    assert sorted(m.nonce_hits) == [0, 1, 2] and m.nonce_index == str(folder)
    tokens = m.nonce_sentence.split()
    index = CorpusIndex(folder, emb.checksum)
    try:
        vecs = query_vectors(emb, tokens, tokens.index("blorft"), index.layers)
        for layer in (0, 1, 2):
            want = index.search(vecs[layer], layer, 5)
            got = m.nonce_hits[layer]
            assert [(h["sentence_id"], h["position"]) for h in got] == [
                (h.sentence_id, h.position) for h in want]
            assert [h["cosine"] for h in got] == pytest.approx([h.cosine for h in want], abs=1e-5)
    finally:
        index.close()
    # "blorft" occurs in the corpus: at layer 0 (spelling only) it is its own nearest occurrence
    assert m.nonce_hits[0][0]["word"] == "blorft"
    assert m.nonce_hits[0][0]["cosine"] == pytest.approx(1.0, abs=1e-4)
    text = panel.view.nonce_text.toPlainText()
    assert "Nearest occurrences" in text and "No predictions" in text
    _, left, word, right = m.nonce_kwic()[0][1][0]
    assert f"{left.strip()} [{word}] {right}" in text and word == "blorft"
    assert "6 sentences" in panel.view.index_info.text()
    # a folder that is not an index, and an index of another model: one line each
    not_index = tmp_path / "not an index"
    not_index.mkdir()
    panel.set_index(IndexSource.FOLDER, str(not_index))
    qtbot.waitUntil(lambda: panel.is_ready() and "Characters:" in panel.view.status.text(),
                    timeout=60000)
    assert "is not a corpus index" in panel.view.status.text() and str(not_index) in \
        panel.view.status.text()
    assert m.index_source is IndexSource.CORPUS and m.nonce is None and m.nonce_problem
    assert m.nonce_index == str(folder) and sorted(m.nonce_hits) == [0, 1, 2]   # searched again
    other = _build_index(tmp_path, tmp_path / "other", FIXTURES / "allennlp")
    panel.set_index(IndexSource.FOLDER, str(other))
    qtbot.waitUntil(lambda: panel.is_ready() and "another model" in panel.view.status.text(),
                    timeout=60000)
    assert "\n" not in panel.view.status.text()
    # a folder of this model's index: chosen, saved and restored
    _wait_nonce(qtbot, panel, lambda: panel.set_index(IndexSource.FOLDER, str(folder)))
    assert panel.view.index_combo.currentText() == f"Index: {folder.name}"
    state = panel.view_state()
    assert (state["index"], state["index_folder"]) == ("folder", str(folder))
    _wait_nonce(qtbot, panel, lambda: panel.set_index(IndexSource.NONE))
    assert m.nonce_hits == {} and "Nearest occurrences" not in panel.view.nonce_text.toPlainText()
    panel.restore_view_state(state)
    qtbot.waitUntil(lambda: panel.is_ready() and bool(panel.model.nonce_hits), timeout=60000)
    assert panel.model.index_source is IndexSource.FOLDER


def test_a_vocabularys_vectors_show_progress_and_cancel(qtbot, panel, ws, tmp_path, monkeypatch):
    import time

    f = tmp_path / "many.txt"
    f.write_text("\n".join(f"w{i}x" for i in range(5 * 4096)) + "\n", encoding="utf-8")
    emb = ws.embedder
    real = emb.token_vectors
    monkeypatch.setattr(emb, "token_vectors", lambda words: (time.sleep(0.3), real(words))[1])
    shown, before = panel.model.vocabulary, panel.model.lab
    panel.set_vocabulary(VocabSource.FILE, str(f))
    qtbot.waitUntil(lambda: "layer-0 vectors of 20,480 known words" in panel.view.status.text(),
                    timeout=30000)                     # progress: "… (4096/20480)"
    assert panel.view.cancel_button.isEnabled()
    panel.view.cancel_button.click()
    qtbot.waitUntil(panel.is_ready, timeout=30000)
    assert panel.model.vocabulary == shown and panel.model.lab == before
    assert "file" not in panel.kept.vocabulary_kinds()             # nothing half-kept
    assert "Characters:" not in panel.view.status.text()


def test_the_word_lab_says_the_models_own_cut_and_no_highway(qtbot):
    """An attack pass on odd shapes: a model of 10 characters a word said "cut to the first 48
    bytes" (the published models' M − 2), and one without highway layers began the line with
    "; "."""
    import torch

    from elmo_engine.model.bilm import BiLM
    from elmo_engine.model.options import BiLMOptions
    from elmo_explorer.views.characters.model import CharactersModel
    from elmo_explorer.views.characters.view import CharactersView

    opts = BiLMOptions(filters=((1, 4), (2, 4)), char_embed_dim=4, n_highway=0,
                       projection_dim=8, lstm_dim=16, n_layers=1, max_characters_per_token=10)
    model = BiLM(opts)
    torch.manual_seed(0)
    filters = filters_of(model.char_cnn)
    m = CharactersModel()
    m.lab = [r.to_dict(filters, 100) for r in analyse(filters, ["Antidisestablishmentarianism",
                                                                 "cat"])]
    assert [d["kept_bytes"] for d in m.lab] == [8, 8] and m.lab[0]["truncated"]
    view = CharactersView()
    qtbot.addWidget(view)
    view.draw_lab(m)
    text = view.lab_text.toPlainText()
    assert "28 UTF-8 bytes — cut to the first 8 bytes" in text and "48" not in text
    assert "3 UTF-8 bytes; ids" in text
    lines = [line for line in text.splitlines() if line.startswith("norm") or "; norm" in line]
    assert len(lines) == 2 and all(line.startswith("norm ") for line in lines), text
    m.lab[0].pop("kept_bytes")                      # a lab kept before the field was written
    view.draw_lab(m)
    assert "28 UTF-8 bytes — cut; ids" in view.lab_text.toPlainText()
