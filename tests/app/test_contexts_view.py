"""The contexts panel on a real Workspace with a tiny random checkpoint (offscreen Qt)."""
from __future__ import annotations

import csv
import json

import numpy as np
import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt

from elmo_explorer.common.figure_export import FigureOptions
from elmo_explorer.views.contexts.controller import ContextsPanel
from elmo_explorer.views.contexts.export import neighbour_rows
from elmo_explorer.state.workspace import ModelSpec, TokenRef, Workspace
from elmo_engine.analysis.contexts import compare as cmp

pytestmark = [pytest.mark.gui, pytest.mark.usefixtures("torch_one_thread")]

SENTENCES = [
    "We sat on the bank of the river .",
    "She paid the money into the bank today .",
    "The bank of the river was muddy .",
    "The bank raised its interest rates .",
]


@pytest.fixture
def panel(qtbot, tiny_checkpoint):
    ws = Workspace()
    errors = []
    ws.worker.unhandled_error.connect(lambda name, msg: errors.append(f"{name}: {msg}"))
    p = ContextsPanel(ws)
    p.view.set_box.setChecked(False)     # the loaded sentences alone (the set: its own tests)
    qtbot.addWidget(p)
    p.resize(1200, 800)
    p.show()
    with qtbot.waitSignal(p.ready, timeout=30000):
        ws.load_model(ModelSpec(str(tiny_checkpoint), device="cpu"))
        ws.set_sentences(SENTENCES)
    yield p
    assert ws.worker.shutdown(timeout_s=5)
    assert errors == []


def test_bank_first_matrices_and_summary(panel):
    ws = panel.ws
    assert panel.is_ready() and panel.model.word == "bank"
    comp = panel.model.comparison
    assert comp.occurrences == ((0, 4), (1, 6), (2, 1), (3, 1))
    assert comp.matrices.shape == (4, 4, 4) and panel.model.vectors.shape == (3, 4, 32)
    np.testing.assert_allclose(comp.matrices[0], 1.0, atol=1e-6)
    ref = cmp.compare(cmp.gather(ws.activations, comp.occurrences), None,
                      layer_norm=cmp.layer_stats(ws.activations))     # the default mix
    np.testing.assert_allclose(comp.matrices, ref.matrices, atol=1e-6)
    assert comp.layer_norm and panel.view.mix.weights() == [0.33, 0.33, 0.33]
    assert len(panel.view.heatmaps.images) == 4
    image = panel.view.heatmaps.images[2].image                 # each cell a block of f × f pixels
    f = image.shape[0] // 4
    assert image.shape == (4 * f, 4 * f) and f >= 2
    np.testing.assert_allclose(image[::f, ::f], comp.matrices[2].T)
    # every heatmap labelled the same way and drawn the same size (layer 0 included)
    lefts = [p.getAxis("left") for p in panel.view.heatmaps.plots]
    assert all(a._tickLevels == lefts[0]._tickLevels for a in lefts)
    widths = [p.getViewBox().width() for p in panel.view.heatmaps.plots]
    assert max(widths) - min(widths) <= 2 and min(widths) > 100
    assert panel.view.summary.columnCount() == 4
    assert panel.view.summary.item(0, 1).text() == f"{comp.self_sim[1]:.3f}"
    assert panel.view.occ_table.rowCount() == 4
    assert "<b>bank</b>" in panel.view.occ_table.item(1, 2).text()
    # neighbours of the first occurrence, per contextual layer, the token itself left out
    table = panel.model.table
    assert [name for name, _ in table.layers] == ["layer 1", "layer 2"]
    assert all(len(nbs) == 8 for _, nbs in table.layers)
    assert all((nb.sentence, nb.token) != (0, 4) for _, nbs in table.layers for nb in nbs)
    assert "bank" not in [w for w, _ in table.words]
    assert "<b>" in panel.view.neighbours.toHtml() or "font-weight" in panel.view.neighbours.toHtml()


def test_hover_text(panel, qtbot):
    grid = panel.view.heatmaps
    comp = panel.model.comparison
    pos = grid.scene_pos_of(1, 0, 2)
    assert grid.cell_at(pos) == (1, 0, 2)
    with qtbot.waitSignal(grid.hovered, timeout=2000) as sig:
        grid._on_mouse_moved(pos)
    text = sig.args[0]
    assert text.startswith("layer 1: #1 ") and "#3 " in text
    assert text.endswith(f"{comp.matrices[1, 0, 2]:.4f}")
    assert panel.view.hover_label.text() == text
    # a real mouse move over another cell
    view_pos = grid.mapFromScene(grid.scene_pos_of(3, 2, 1))
    with qtbot.waitSignal(grid.hovered, timeout=2000,
                          check_params_cb=lambda t: t.startswith("mix: #3 ")) as sig:
        qtbot.mouseMove(grid.viewport(), view_pos)
    assert sig.args[0].endswith(f"{comp.matrices[3, 2, 1]:.4f}")
    # clicking a cell selects its row's occurrence (for the neighbour table)
    with qtbot.waitSignal(panel.neighbours_drawn, timeout=10000):
        qtbot.mouseClick(grid.viewport(), Qt.MouseButton.LeftButton, pos=view_pos)
    assert panel.model.query == comp.occurrences[2] and panel.ws.selection == TokenRef(2, 1)


def test_toggles_groups_and_selection(panel, qtbot):
    acts = panel.ws.activations
    vec = cmp.gather(acts, panel.model.comparison.occurrences)
    stats = cmp.layer_stats(acts)
    with qtbot.waitSignal(panel.comparison_drawn, timeout=10000):
        panel.set_direction("forward")
    np.testing.assert_allclose(panel.model.comparison.matrices,
                               cmp.compare(vec, None, "forward", layer_norm=stats).matrices,
                               atol=1e-6)
    with qtbot.waitSignal(panel.comparison_drawn, timeout=10000):
        panel.set_corrected(True)
    mean = cmp.reference_mean(acts)
    np.testing.assert_allclose(panel.model.comparison.matrices,
                               cmp.compare(vec, None, "forward", mean, layer_norm=stats).matrices,
                               atol=1e-6)
    with qtbot.waitSignal(panel.comparison_drawn, timeout=10000):
        panel.set_weights([0, 0, 1])
    assert panel.view.mix.weights() == [0.0, 0.0, 1.0]               # the weights shown are used
    np.testing.assert_allclose(panel.model.comparison.matrices[3],
                               cmp.compare(vec, [0, 0, 1], "forward", mean,
                                           layer_norm=stats).matrices[3], atol=1e-6)
    with qtbot.waitSignal(panel.comparison_drawn, timeout=10000):
        panel.view.norm_box.setChecked(False)                           # raw layers: layer 2
    np.testing.assert_allclose(panel.model.comparison.matrices[3],
                               panel.model.comparison.matrices[2], atol=1e-6)
    for row, label in enumerate(["river", "money", "river"]):
        with qtbot.waitSignal(panel.comparison_drawn, timeout=10000):
            panel.set_group(row, label)
    comp = panel.model.comparison
    assert comp.groups == ("river", "river", "money", "")               # ordered by group
    assert comp.occurrences == ((0, 4), (2, 1), (1, 6), (3, 1))
    m = comp.matrices[2]
    assert comp.within[2] == pytest.approx(m[0, 1])
    assert comp.between[2] == pytest.approx((m[0, 2] + m[1, 2]) / 2)
    assert comp.test.exact and comp.test.n == 3 and 0 < comp.p_value[2] <= 1
    assert panel.view.summary.verticalHeaderItem(4).text() == "p (permutation)"
    assert panel.view.summary.item(4, 2).text() == f"{comp.p_value[2]:.3f}"
    assert "permutation test" in panel.view.summary.toolTip()
    assert len(panel.view.heatmaps._lines) == 2 * 2 * 4                 # 2 cuts × 2 axes × 4 maps
    assert panel.view.summary.item(1, 2).text() == f"{m[0, 1]:.3f}"
    # clicking a token elsewhere in the app picks its word and that occurrence
    with qtbot.waitSignal(panel.neighbours_drawn, timeout=10000):
        panel.ws.select(TokenRef(1, 4))                          # "into"
    assert panel.model.word == "into" and panel.model.query == (1, 4)
    assert panel.model.comparison.matrices.shape == (4, 1, 1)


def test_unknown_word_gets_layer0_neighbours(panel, qtbot):
    with qtbot.waitSignal(panel.neighbours_drawn, timeout=10000):
        panel.set_word("recieve")
    assert panel.model.comparison is None
    assert [len(nbs) for _, nbs in panel.model.table.layers] == [8, 8]
    assert len(panel.model.table.words) == 8 and "recieve" not in [w for w, _ in panel.model.table.words]
    assert "does not occur" in panel.view.status.text()


def test_exports_write_files(panel, qtbot, tmp_path):
    png = tmp_path / "layer1.png"
    with qtbot.waitSignal(panel.exported, timeout=5000):
        panel.export_heatmap(png, view=1)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with qtbot.waitSignal(panel.exported, timeout=5000):
        panel.export_heatmap(tmp_path / "all.svg")
    assert b"<svg" in (tmp_path / "all.svg").read_bytes()[:2000]
    assert "layer 1 (biLSTM)" in (tmp_path / "all.svg").read_text(encoding="utf-8")
    with qtbot.waitSignal(panel.exported, timeout=5000):
        panel.export_heatmap(tmp_path / "all.pdf")
    assert (tmp_path / "all.pdf").read_bytes()[:5] == b"%PDF-"
    with qtbot.waitSignal(panel.exported, timeout=5000):
        panel.export_matrices_csv(tmp_path / "m.csv")
    back = cmp.read_matrices_csv(tmp_path / "m.csv")
    np.testing.assert_allclose(back["mix"], panel.model.comparison.matrices[3], atol=1e-6)
    with qtbot.waitSignal(panel.exported, timeout=5000):
        panel.export_neighbours_csv(tmp_path / "n.csv")
    with open(tmp_path / "n.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["view"] for r in rows} == {"layer 0", "layer 1", "layer 2"} and len(rows) == 24
    with qtbot.waitSignal(panel.exported, timeout=5000):      # one row selected: all rows
        panel.export_vectors_npz(tmp_path / "all.npz")
    with np.load(tmp_path / "all.npz", allow_pickle=False) as z:
        np.testing.assert_array_equal(z["vectors"], panel.model.vectors)
    sel = panel.view.occ_table.selectionModel()
    model = panel.view.occ_table.model()
    panel.view.occ_table.clearSelection()
    for r in (1, 2):
        sel.select(model.index(r, 0), sel.SelectionFlag.Select | sel.SelectionFlag.Rows)
    with qtbot.waitSignal(panel.exported, timeout=5000):
        panel.export_vectors_npz(tmp_path / "v.npz")
    with np.load(tmp_path / "v.npz", allow_pickle=False) as z:
        np.testing.assert_array_equal(z["vectors"], panel.model.vectors[:, [1, 2]])
        assert list(z["sentence"]) == [1, 2] and list(z["word"]) == ["bank", "bank"]
    with qtbot.waitSignal(panel.exported, timeout=5000):
        panel.export_vectors_tsv(tmp_path / "v.tsv", view=1)
    np.testing.assert_allclose(np.loadtxt(tmp_path / "v.tsv", delimiter="\t"),
                               panel.model.vectors[1, [1, 2]], rtol=1e-5, atol=1e-6)
    meta = (tmp_path / "v.metadata.tsv").read_text(encoding="utf-8").splitlines()
    assert meta[0] == "sentence\ttoken\tword\tgroup\ttext" and meta[2].startswith("2\t1\tbank")
    # a 248-byte name is valid, its `.metadata.tsv` companion is not: nothing is written (an
    # encodings attack pass found the vectors written and the metadata failing after them)
    long = tmp_path / ("é" * 122 + ".tsv")
    with qtbot.waitSignal(panel.failed, timeout=5000) as failed:
        panel.export_vectors_tsv(long, view=1)
    assert "file names take at most 255" in failed.args[0]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("é")]
    assert len(panel.export_actions()) == 5 and all(a.isEnabled() for a in panel.export_actions())


def test_reference_file_joins_the_corpus(panel, qtbot, tmp_path):
    ref = tmp_path / "ref.txt"
    ref.write_text("The bank of the canal was steep .\n\nA bank loan is money .\n", encoding="utf-8")
    loaded = sum(len(t) for t in panel.ws.tokens)
    panel.set_reference_file(ref)
    qtbot.waitUntil(lambda: panel.model.index is not None and panel.model.index.n_tokens == loaded + 14
                    and f"{loaded + 14:,} tokens" in panel.view.neighbours.toPlainText(), timeout=60000)
    assert panel.model.index.tokens[4:] == [["The", "bank", "of", "the", "canal", "was", "steep", "."],
                                      ["A", "bank", "loan", "is", "money", "."]]
    assert panel.view.ref_label.text() == "ref.txt: 2 sentences"
    # the query token (sentence 0) is still left out of its own neighbours
    assert all((nb.sentence, nb.token) != panel.model.query for _, nbs in panel.model.table.layers for nb in nbs)
    # the anisotropy reference is now the whole corpus (loaded sentences + the reference file)
    with qtbot.waitSignal(panel.comparison_drawn, timeout=10000):
        panel.set_corrected(True)
    vec = cmp.gather(panel.ws.activations, panel.model.comparison.occurrences)
    np.testing.assert_allclose(panel.model.comparison.matrices,
                               cmp.compare(vec, None, "both", panel.model.index.mean,
                                           layer_norm=cmp.layer_stats(panel.ws.activations)
                                           ).matrices, atol=1e-6)
    assert not np.allclose(panel.model.index.mean, cmp.reference_mean(panel.ws.activations))
    assert f"mean of {loaded + 14:,} tokens" in panel.view.status.text()


def test_a_reference_text_is_read_as_contexts_reference_reads_it(panel, qtbot, tmp_path,
                                                                 monkeypatch):
    """*Reference text…* asks how to read the file (*Pretokenized*, *Split each line into
    sentences*: ``contexts --reference``'s ``--pretokenized`` and ``--split-sentences``, on by
    default as there; the view read whole lines before); the neighbour corpus holds what the
    command's reader gives, the label says the reading, and the saved view reads it again
    the same way."""
    from PySide6.QtWidgets import QFileDialog

    from elmo_engine.analysis.contexts.neighbour_corpus import read_corpus
    from elmo_explorer.views.reading import CorpusReading
    from elmo_explorer.views.reading_dialog import ReadingDialog

    ref = tmp_path / "wiki.txt"
    ref.write_text("The bank of the river was steep . A well @-@ known bank lends money .\n",
                   encoding="utf-8")                           # WikiText: tokenized already
    loaded = len(panel.ws.tokens)
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a, **k: (str(ref), ""))
    answers = iter([lambda d: None, lambda d: d.pretokenized.setChecked(True)])

    def answer(dlg):                       # the defaults first, then the user ticks Pretokenized
        assert dlg.reading() == CorpusReading() and dlg.split.isChecked()
        next(answers)(dlg)
        return ReadingDialog.DialogCode.Accepted

    monkeypatch.setattr(ReadingDialog, "exec", answer)
    for reading in (CorpusReading(), CorpusReading(pretokenized=True)):
        want = read_corpus(ref, reading.pretokenized, reading.split_sentences).sentences
        panel.ask_reference()
        qtbot.waitUntil(lambda: panel.model.index is not None
                        and panel.model.index.tokens[loaded:] == want, timeout=60000)
        assert panel.model.reference_reading == reading
    assert [len(s) for s in want] == [8, 8] and "@-@" in want[1]     # two sentences, "@-@" whole
    assert panel.view.ref_label.text() == "wiki.txt: 2 sentences (pretokenized)"
    state = panel.view_state()
    assert state["reference_reading"] == {"pretokenized": True, "split_sentences": True}
    panel.set_reference_file(ref)                                    # the default reading
    qtbot.waitUntil(lambda: panel.model.reference_reading == CorpusReading(), timeout=60000)
    panel.restore_view_state(state)                                  # read again, pretokenized
    qtbot.waitUntil(lambda: panel.model.reference_reading == CorpusReading(True), timeout=60000)


def test_the_words_reference_set_sentences_join_the_corpus(panel, qtbot):
    """Issue 39: one reference set for every view. The neighbours of a word come from the loaded
    sentences and the word's sentences of the bundled set (SemCor first), as ``contexts`` and
    the report list them; another word brings its own; the box takes them out."""
    from elmo_engine.io.datasets.reference_set import REFERENCE_SET_SENTENCES, reference_set_corpus

    loaded = [list(t) for t in panel.ws.tokens]
    n_loaded = sum(map(len, loaded))

    def corpus_is(extra):
        index = panel.model.index
        return (index is not None and index.tokens == loaded + extra
                and panel.model.table is not None and panel.model.table.query == panel.model.word)

    bank = reference_set_corpus("bank", REFERENCE_SET_SENTENCES)
    assert len(bank) == REFERENCE_SET_SENTENCES and all("bank" in " ".join(t).lower() for t in bank)
    panel.view.set_box.setChecked(True)
    qtbot.waitUntil(lambda: corpus_is(bank), timeout=60000)
    assert panel.model.index.n_tokens == n_loaded + sum(map(len, bank))
    assert panel.view_state()["reference_set"] is True
    assert any(nb.sentence >= len(loaded) for _, nbs in panel.model.table.layers for nb in nbs)
    panel.set_word("money")
    qtbot.waitUntil(lambda: corpus_is(reference_set_corpus("money", REFERENCE_SET_SENTENCES)),
                    timeout=60000)
    panel.view.set_box.setChecked(False)
    qtbot.waitUntil(lambda: corpus_is([]), timeout=60000)
    assert panel.view_state()["reference_set"] is False


def test_new_sentences_recompute_and_signal_ready(panel, qtbot):
    with qtbot.waitSignal(panel.comparison_drawn, timeout=10000):
        panel.set_group(1, "money")
    with qtbot.waitSignal(panel.ready, timeout=60000):
        panel.ws.set_sentences(["A new first line ."] + SENTENCES[:2]
                               + ["A bank , a bank , my kingdom for a bank ."])
    assert panel.model.word == "bank"
    assert panel.model.comparison.occurrences == ((2, 6), (1, 4), (3, 1), (3, 4), (3, 10))
    assert panel.model.comparison.groups == ("money", "", "", "", "")       # moved with its sentence
    assert panel.model.comparison.matrices.shape == (4, 5, 5)
    assert panel.model.index.n_tokens == sum(len(t) for t in panel.ws.tokens)


def test_view_state_round_trip(panel, qtbot):
    ws = panel.ws
    with qtbot.waitSignal(panel.comparison_drawn, timeout=10000):
        panel.set_weights([0, 1, 2])
    panel.set_direction("backward")
    panel.view.k_box.setValue(5)
    with qtbot.waitSignal(panel.comparison_drawn, timeout=10000):
        panel.set_corrected(True)
    for row, label in ((0, "river"), (1, "money")):
        with qtbot.waitSignal(panel.comparison_drawn, timeout=10000):
            panel.set_group(row, label)
    with qtbot.waitSignal(panel.neighbours_drawn, timeout=10000):
        panel.select_occurrence(2)
    state = json.loads(json.dumps(panel.view_state()))              # JSON values only
    assert state["word"] == "bank" and state["weights"] == [0.0, 0.33, 0.67]
    assert state["direction"] == "backward" and state["corrected"] is True and state["k"] == 5
    assert state["selected"] == {"sentence": 2, "token": 1}
    assert state["groups"] == {"bank": [{"sentence": 0, "token": 4, "group": "river"},
                                        {"sentence": 1, "token": 6, "group": "money"}]}
    # somewhere else entirely, then back
    with qtbot.waitSignal(panel.neighbours_drawn, timeout=10000):
        ws.select(TokenRef(1, 4))                                   # "into"
    panel.set_weights([1, 1, 1])
    panel.set_direction("both")
    panel.set_corrected(False)
    panel.view.k_box.setValue(8)
    with qtbot.waitSignal(panel.neighbours_drawn, timeout=10000):
        panel.restore_view_state(dict(state, unknown_key=[1, 2]))
        ws.select(TokenRef(0, 1))        # the workspace's selection, applied right after: "sat"
    qtbot.waitUntil(lambda: panel.model.comparison is not None and panel.model.comparison.word == "bank")
    comp = panel.model.comparison
    assert panel.model.word == "bank" and panel.view.mix.weights() == [0.0, 0.33, 0.67]
    assert comp.direction == "backward" and comp.corrected and panel.view.k_box.value() == 5
    assert comp.groups == ("river", "money", "", "")
    np.testing.assert_allclose(comp.weights, [0, 0.33, 0.67], atol=1e-6)
    vec = cmp.gather(ws.activations, comp.occurrences)
    ref = cmp.compare(vec, [0, 0.33, 0.67], "backward", panel.model.index.mean, comp.groups,
                      layer_norm=cmp.layer_stats(ws.activations))
    np.testing.assert_allclose(comp.matrices, ref.matrices, atol=1e-6)
    assert panel.model.query == (2, 1) and all(len(nbs) == 5 for _, nbs in panel.model.table.layers)
    assert panel.view_state() == state


def test_restore_view_state_tolerates_bad_values(panel, qtbot):
    before = panel.view_state()
    panel.restore_view_state(None)
    panel.restore_view_state("not a dict")
    with qtbot.waitSignal(panel.comparison_drawn, timeout=10000):
        panel.restore_view_state({"weights": [1, 2], "direction": "sideways", "k": "many",
                                  "corrected": "yes", "selected": {"sentence": 99, "token": 0},
                                  "groups": {"bank": [{"sentence": 9, "token": 0, "group": "x"},
                                                      {"sentence": 1, "token": 0, "group": "x"},
                                                      "junk"], "7": 3},
                                  "reference_file": "/no/such/file.txt", "version": 99})
    assert panel.view_state() == before
    assert panel.model.comparison.groups == ("", "", "", "")


def wf_checksum(path) -> str:
    from elmo_engine.io.workspace_file import checkpoint_checksum

    return checkpoint_checksum(path)


def _contexts_window(qtbot, app_settings_dir, checkpoint, text: str):
    """A main window with the contexts view only, started on ``checkpoint`` and ``text``:
    ``(window, its workspace actions, errors shown, the contexts panel)``."""
    import elmo_explorer.persistence.workspace_actions as wa
    from elmo_explorer.shell.main_window import MainWindow
    from elmo_explorer.state.settings import AppSettings

    w = MainWindow(AppSettings(app_settings_dir), views=("contexts",))
    qtbot.addWidget(w)
    w.show()
    errors = []
    w.show_error = lambda title, msg: errors.append((title, msg))
    panel = w.panels["contexts"]
    try:
        with qtbot.waitSignal(panel.ready, timeout=30000):
            w.start(str(checkpoint), text)
    except BaseException:
        w.workspace.worker.shutdown()
        raise
    return w, wa.install_workspace_actions(w, recover=False), errors, panel


def test_workspace_save_open_and_report(qtbot, app_settings_dir, tiny_checkpoint, tmp_path):
    """Through the real File → Save/Open workspace and Export report of the main window."""
    w, actions, errors, panel = _contexts_window(qtbot, app_settings_dir, tiny_checkpoint,
                                                 "\n".join(SENTENCES) + "\n")
    try:
        with qtbot.waitSignal(panel.comparison_drawn, timeout=10000):
            panel.set_direction("forward")
        with qtbot.waitSignal(panel.comparison_drawn, timeout=10000):
            panel.set_group(0, "river")
        path = tmp_path / "a.elmows.json"
        with qtbot.waitSignal(actions.saved, timeout=10000):
            actions.save_workspace(path)
        saved = json.loads(path.read_text(encoding="utf-8"))["views"]["contexts"]
        assert saved["word"] == "bank" and saved["direction"] == "forward"
        with qtbot.waitSignal(panel.comparison_drawn, timeout=10000):
            panel.set_word("river")
        with qtbot.waitSignal(actions.restored, timeout=60000):
            actions.open_workspace(path)
        qtbot.waitUntil(lambda: panel.model.comparison is not None and panel.model.comparison.word == "bank"
                        and panel.model.index is not None and panel.model.table is not None
                        and panel.model.table.query == "bank", timeout=10000)   # neighbours drawn
        assert panel.model.comparison.direction == "forward" and panel.model.comparison.groups[0] == "river"
        out = tmp_path / "report"
        with qtbot.waitSignal(actions.exported, timeout=30000):
            actions.export_report(out, FigureOptions(3.0, 2.4, 30, keep_aspect=False))
        assert sorted(p.name for p in (out / "figures").iterdir()) == sorted(
            [f"contexts_bank_{v}.{e}" for v in ("heatmaps", "summary") for e in ("png", "svg")]
            + ["projection_pca.png", "projection_pca.svg"])      # no projection view: PCA
        tables = {p.name for p in (out / "tables").iterdir()}   # the engine's one report path
        assert {"contexts_summary.csv", "contexts_occurrences.csv",
                "contexts_similarity_mix.csv", "contexts_neighbours.csv"} <= tables
        with open(out / "tables" / "contexts_neighbours.csv", encoding="utf-8", newline="") as fh:
            rows = list(csv.reader(fh))[1:]                       # the neighbours the view shows
        assert rows == [[str(x) for x in r] for r in neighbour_rows(panel.model)]
        with open(out / "tables" / "contexts_occurrences.csv", encoding="utf-8") as fh:
            assert "river" in fh.read()                           # the view's groups kept
        page = (out / "report.html").read_text(encoding="utf-8")
        assert "figures/contexts_bank_heatmaps.png" in page and "forward halves" in page
        assert errors == []
    finally:
        w.workspace.worker.shutdown()


def test_the_app_opens_the_workspace_of_the_report_command(qtbot, app_settings_dir,
                                                           tiny_checkpoint, tmp_path):
    """``elmo-explorer report --workspace`` writes a workspace the app opens: the sentences,
    the model, "bank" selected and compared, the file's groups kept."""
    from elmo_engine.cli.main import main

    text = tmp_path / "s.tsv"
    groups = ["river", "money", "river", "money"]
    text.write_text("".join(f"bank: {g}\t{s}\n" for g, s in zip(groups, SENTENCES)),
                    encoding="utf-8")
    ws_path = tmp_path / "r.elmows.json"
    assert main(["report", str(text), "--word", "bank", "--checkpoint", str(tiny_checkpoint),
                 "--out", str(tmp_path / "rep"), "--workspace", str(ws_path),
                 "--device", "cpu"]) == 0
    w, actions, errors, panel = _contexts_window(qtbot, app_settings_dir, tiny_checkpoint,
                                                 "Unrelated text .\n")
    try:
        with qtbot.waitSignal(actions.restored, timeout=60000):
            actions.open_workspace(ws_path)
        qtbot.waitUntil(lambda: panel.model.comparison is not None
                        and panel.model.comparison.word == "bank", timeout=20000)
        assert w.workspace.sentences == SENTENCES
        assert w.workspace.model_info.checksum == wf_checksum(tiny_checkpoint)
        assert list(panel.model.comparison.groups) == ["river", "river", "money", "money"]
        assert errors == []
    finally:
        w.workspace.worker.shutdown()


def test_a_launch_finds_the_last_ones_neighbour_index_on_disk(qtbot, app_settings_dir,
                                                              tiny_checkpoint, monkeypatch):
    """In a window the neighbour index is kept in the data folder (cache/neighbours): the next
    window on the same model and sentences reads it instead of embedding the corpus again."""
    from elmo_engine.analysis.contexts import neighbour_corpus

    text = "\n".join(SENTENCES) + "\n"
    w, _actions, errors, panel = _contexts_window(qtbot, app_settings_dir, tiny_checkpoint, text)
    try:
        qtbot.waitUntil(lambda: panel.model.index is not None and panel.model.table is not None,
                        timeout=30000)
        first = panel.model.table
    finally:
        w.workspace.worker.shutdown()
    folder = app_settings_dir / "data" / "cache" / "neighbours"
    assert len(list(folder.glob("neighbours-*.npz"))) == 1 and not errors

    def no_build(*_a, **_k):
        raise AssertionError("the index was built again")

    monkeypatch.setattr(neighbour_corpus, "build_index", no_build)
    w, _actions, errors, panel = _contexts_window(qtbot, app_settings_dir, tiny_checkpoint, text)
    try:
        qtbot.waitUntil(lambda: panel.model.index is not None and panel.model.table is not None,
                        timeout=30000)
        assert panel.model.table == first and not errors
    finally:
        w.workspace.worker.shutdown()


def test_the_view_compares_as_many_occurrences_as_the_command(qtbot, tiny_checkpoint,
                                                              monkeypatch):
    """One bound for the view and ``contexts``, the engine's (the command compared every
    occurrence): lowered to 3 here, the view compares the first 3 of the 4 and says so."""
    monkeypatch.setattr(cmp, "MAX_OCCURRENCES", 3)
    ws = Workspace()
    p = ContextsPanel(ws)
    p.view.set_box.setChecked(False)
    qtbot.addWidget(p)
    p.show()
    try:
        with qtbot.waitSignal(p.ready, timeout=30000):
            ws.load_model(ModelSpec(str(tiny_checkpoint), device="cpu"))
            ws.set_sentences(SENTENCES)
        assert p.model.comparison.occurrences == ((0, 4), (1, 6), (2, 1))
        assert "(the first 3 of 4)" in p.view.status.text()
    finally:
        assert ws.worker.shutdown(timeout_s=5)


def test_a_cancelled_neighbour_index_is_built_again_when_the_neighbours_are_asked(qtbot, panel):
    """Esc while the neighbour index built left it marked as built: no neighbours for any word
    until the sentences changed. Now a cancel forgets the mark, and the next word builds it."""
    m, ws = panel.model, panel.ws
    panel.view.set_box.setChecked(True)                 # another corpus: the index is rebuilt
    assert panel.jobs.is_running("index")
    ws.worker.cancel_all()                              # what Esc does
    from elmo_explorer.views.contexts.controller import CANCELLED

    qtbot.waitUntil(lambda: panel.jobs.is_idle() and m.index is None
                    and m.index_sig == CANCELLED, timeout=30000)
    assert "Cancelled" in panel.view.status.text()
    panel.set_word("river")
    qtbot.waitUntil(lambda: m.index is not None and m.table is not None
                    and m.table.query == "river", timeout=60000)
