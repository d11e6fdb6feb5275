"""The contexts panel on a real Workspace with a tiny random checkpoint (offscreen Qt)."""
from __future__ import annotations

import csv

import numpy as np
import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt  # noqa: E402

from app.panels.contexts import ContextsPanel  # noqa: E402
from app.workspace import ModelSpec, TokenRef, Workspace  # noqa: E402
from elmo_engine import compare as cmp  # noqa: E402

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
    assert panel.is_ready() and panel.word == "bank"
    comp = panel.comparison
    assert comp.occurrences == ((0, 4), (1, 6), (2, 1), (3, 1))
    assert comp.matrices.shape == (4, 4, 4) and panel.vectors.shape == (3, 4, 32)
    np.testing.assert_allclose(comp.matrices[0], 1.0, atol=1e-6)
    ref = cmp.compare(cmp.gather(ws.activations, comp.occurrences), None)
    np.testing.assert_allclose(comp.matrices, ref.matrices, atol=1e-6)
    assert len(panel.heatmaps.images) == 4
    np.testing.assert_allclose(panel.heatmaps.images[2].image, comp.matrices[2].T)
    assert panel.summary.columnCount() == 4
    assert panel.summary.item(0, 1).text() == f"{comp.self_sim[1]:.3f}"
    assert panel.occ_table.rowCount() == 4
    assert "<b>bank</b>" in panel.occ_table.item(1, 2).text()
    # neighbours of the first occurrence, per contextual layer, the token itself left out
    table = panel.table
    assert [name for name, _ in table.layers] == ["layer 1", "layer 2"]
    assert all(len(nbs) == 8 for _, nbs in table.layers)
    assert all((nb.sentence, nb.token) != (0, 4) for _, nbs in table.layers for nb in nbs)
    assert "bank" not in [w for w, _ in table.words]
    assert "<b>" in panel.neighbours.toHtml() or "font-weight" in panel.neighbours.toHtml()


def test_hover_text(panel, qtbot):
    grid = panel.heatmaps
    comp = panel.comparison
    pos = grid.scene_pos_of(1, 0, 2)
    assert grid.cell_at(pos) == (1, 0, 2)
    with qtbot.waitSignal(grid.hovered, timeout=2000) as sig:
        grid._on_mouse_moved(pos)
    text = sig.args[0]
    assert text.startswith("layer 1: #1 ") and "#3 " in text
    assert text.endswith(f"{comp.matrices[1, 0, 2]:.4f}")
    assert panel.hover_label.text() == text
    # a real mouse move over another cell
    view_pos = grid.mapFromScene(grid.scene_pos_of(3, 2, 1))
    with qtbot.waitSignal(grid.hovered, timeout=2000,
                          check_params_cb=lambda t: t.startswith("mix: #3 ")) as sig:
        qtbot.mouseMove(grid.viewport(), view_pos)
    assert sig.args[0].endswith(f"{comp.matrices[3, 2, 1]:.4f}")
    # clicking a cell selects its row's occurrence (for the neighbour table)
    with qtbot.waitSignal(panel.neighbours_drawn, timeout=10000):
        qtbot.mouseClick(grid.viewport(), Qt.MouseButton.LeftButton, pos=view_pos)
    assert panel.query == comp.occurrences[2] and panel.ws.selection == TokenRef(2, 1)


def test_toggles_groups_and_selection(panel, qtbot):
    acts = panel.ws.activations
    vec = cmp.gather(acts, panel.comparison.occurrences)
    with qtbot.waitSignal(panel.comparison_drawn, timeout=10000):
        panel.set_direction("forward")
    np.testing.assert_allclose(panel.comparison.matrices,
                               cmp.compare(vec, None, "forward").matrices, atol=1e-6)
    with qtbot.waitSignal(panel.comparison_drawn, timeout=10000):
        panel.set_corrected(True)
    mean = cmp.reference_mean(acts)
    np.testing.assert_allclose(panel.comparison.matrices,
                               cmp.compare(vec, None, "forward", mean).matrices, atol=1e-6)
    with qtbot.waitSignal(panel.comparison_drawn, timeout=10000):
        panel.set_weights([0, 0, 1])
    np.testing.assert_allclose(panel.comparison.matrices[3], panel.comparison.matrices[2], atol=1e-6)
    for row, label in enumerate(["river", "money", "river"]):
        with qtbot.waitSignal(panel.comparison_drawn, timeout=10000):
            panel.set_group(row, label)
    comp = panel.comparison
    assert comp.groups == ("river", "money", "river", "")
    m = comp.matrices[2]
    assert comp.within[2] == pytest.approx(m[0, 2])
    assert comp.between[2] == pytest.approx((m[0, 1] + m[1, 2]) / 2)
    assert panel.summary.item(1, 2).text() == f"{m[0, 2]:.3f}"
    # clicking a token elsewhere in the app picks its word and that occurrence
    with qtbot.waitSignal(panel.neighbours_drawn, timeout=10000):
        panel.ws.select(TokenRef(1, 4))                          # "into"
    assert panel.word == "into" and panel.query == (1, 4)
    assert panel.comparison.matrices.shape == (4, 1, 1)


def test_unknown_word_gets_layer0_neighbours(panel, qtbot):
    with qtbot.waitSignal(panel.neighbours_drawn, timeout=10000):
        panel.set_word("recieve")
    assert panel.comparison is None
    assert [len(nbs) for _, nbs in panel.table.layers] == [8, 8]
    assert len(panel.table.words) == 8 and "recieve" not in [w for w, _ in panel.table.words]
    assert "does not occur" in panel.status.text()


def test_exports_write_files(panel, qtbot, tmp_path):
    png = tmp_path / "layer1.png"
    with qtbot.waitSignal(panel.exported, timeout=5000):
        panel.export_heatmap(png, view=1)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with qtbot.waitSignal(panel.exported, timeout=5000):
        panel.export_heatmap(tmp_path / "all.svg")
    assert b"<svg" in (tmp_path / "all.svg").read_bytes()[:2000]
    with qtbot.waitSignal(panel.exported, timeout=5000):
        panel.export_matrices_csv(tmp_path / "m.csv")
    back = cmp.read_matrices_csv(tmp_path / "m.csv")
    np.testing.assert_allclose(back["mix"], panel.comparison.matrices[3], atol=1e-6)
    with qtbot.waitSignal(panel.exported, timeout=5000):
        panel.export_neighbours_csv(tmp_path / "n.csv")
    with open(tmp_path / "n.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["view"] for r in rows} == {"layer 0", "layer 1", "layer 2"} and len(rows) == 24
    with qtbot.waitSignal(panel.exported, timeout=5000):      # one row selected: all rows
        panel.export_vectors_npz(tmp_path / "all.npz")
    with np.load(tmp_path / "all.npz", allow_pickle=False) as z:
        np.testing.assert_array_equal(z["vectors"], panel.vectors)
    sel = panel.occ_table.selectionModel()
    model = panel.occ_table.model()
    panel.occ_table.clearSelection()
    for r in (1, 2):
        sel.select(model.index(r, 0), sel.SelectionFlag.Select | sel.SelectionFlag.Rows)
    with qtbot.waitSignal(panel.exported, timeout=5000):
        panel.export_vectors_npz(tmp_path / "v.npz")
    with np.load(tmp_path / "v.npz", allow_pickle=False) as z:
        np.testing.assert_array_equal(z["vectors"], panel.vectors[:, [1, 2]])
        assert list(z["sentence"]) == [1, 2] and list(z["word"]) == ["bank", "bank"]
    with qtbot.waitSignal(panel.exported, timeout=5000):
        panel.export_vectors_tsv(tmp_path / "v.tsv", view=1)
    np.testing.assert_allclose(np.loadtxt(tmp_path / "v.tsv", delimiter="\t"),
                               panel.vectors[1, [1, 2]], rtol=1e-5, atol=1e-6)
    meta = (tmp_path / "v.metadata.tsv").read_text(encoding="utf-8").splitlines()
    assert meta[0] == "sentence\ttoken\tword\tgroup\ttext" and meta[2].startswith("2\t1\tbank")
    assert len(panel.export_actions()) == 5 and all(a.isEnabled() for a in panel.export_actions())


def test_reference_file_joins_the_corpus(panel, qtbot, tmp_path):
    ref = tmp_path / "ref.txt"
    ref.write_text("The bank of the canal was steep .\n\nA bank loan is money .\n", encoding="utf-8")
    loaded = sum(len(t) for t in panel.ws.tokens)
    panel.set_reference_file(ref)
    qtbot.waitUntil(lambda: panel.index is not None and panel.index.n_tokens == loaded + 14
                    and f"{loaded + 14:,} tokens" in panel.neighbours.toPlainText(), timeout=20000)
    assert panel.index.tokens[4:] == [["The", "bank", "of", "the", "canal", "was", "steep", "."],
                                      ["A", "bank", "loan", "is", "money", "."]]
    assert panel.ref_label.text() == "ref.txt: 2 sentences"
    # the query token (sentence 0) is still left out of its own neighbours
    assert all((nb.sentence, nb.token) != panel.query for _, nbs in panel.table.layers for nb in nbs)
    # the anisotropy reference is now the whole corpus (loaded sentences + the reference file)
    with qtbot.waitSignal(panel.comparison_drawn, timeout=10000):
        panel.set_corrected(True)
    vec = cmp.gather(panel.ws.activations, panel.comparison.occurrences)
    np.testing.assert_allclose(panel.comparison.matrices,
                               cmp.compare(vec, None, "both", panel.index.mean).matrices, atol=1e-6)
    assert not np.allclose(panel.index.mean, cmp.reference_mean(panel.ws.activations))
    assert f"mean of {loaded + 14:,} tokens" in panel.status.text()


def test_new_sentences_recompute_and_signal_ready(panel, qtbot):
    with qtbot.waitSignal(panel.comparison_drawn, timeout=10000):
        panel.set_group(1, "money")
    with qtbot.waitSignal(panel.ready, timeout=20000):
        panel.ws.set_sentences(["A new first line ."] + SENTENCES[:2]
                               + ["A bank , a bank , my kingdom for a bank ."])
    assert panel.word == "bank"
    assert panel.comparison.occurrences == ((1, 4), (2, 6), (3, 1), (3, 4), (3, 10))
    assert panel.comparison.groups == ("", "money", "", "", "")       # moved with its sentence
    assert panel.comparison.matrices.shape == (4, 5, 5)
    assert panel.index.n_tokens == sum(len(t) for t in panel.ws.tokens)
