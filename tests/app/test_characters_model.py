"""The Characters view's Qt-free model (issue 41): words parsed, the atlas rows by width and by
search, the sweep's table, what the context repairs, saved state round-trips (with the choice of
vocabulary and corpus index), the nonce word's occurrences as keyword-in-context lines."""
from __future__ import annotations

import subprocess
import sys

from elmo_engine.index.search import kwic_line
from elmo_explorer.views.characters.model import (MAX_WORDS, CharactersModel, IndexSource,
                                                  VocabSource, format_ngrams, parse_words)


def _entry(j, width, category="word-internal"):
    return {"filter": j, "width": width, "category": category,
            "ngrams": [{"ngram": f"g{j}", "value": 1.0 / (j + 1), "example": "w"}]}


def test_the_model_imports_no_qt():
    code = ("import sys, elmo_explorer.views.characters.model; "
            "print(any(m.startswith('PySide6') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_words_atlas_rows_and_categories():
    assert parse_words(" blorft  recieve blorft\tx ") == ["blorft", "recieve", "x"]
    assert len(parse_words(" ".join(f"w{i}" for i in range(50)))) == MAX_WORDS
    from elmo_explorer.views.characters.model import words_note

    assert words_note("blorft recieve") == ""
    assert words_note(" ".join(f"w{i}" for i in range(25)) + " w0") == (
        f"The lab shows the first {MAX_WORDS} of 25 words (`elmo-explorer chars` takes any "
        "number); 1 repeated word(s) once.")
    m = CharactersModel()
    m.atlas = [_entry(0, 1, "capitals"), _entry(1, 2), _entry(2, 2, "suffix")]
    assert m.widths() == [1, 2] and len(m.atlas_rows()) == 3
    m.width = 2
    assert [e["filter"] for e in m.atlas_rows()] == [1, 2]
    m.search, m.width = "-ness", 0
    m.search_hits = [{"filter": 2, "relative": 0.9, "window": "ness⟩", "value": 1.0},
                     {"filter": 0, "relative": 0.5, "window": "n", "value": 0.3}]
    rows = m.atlas_rows()
    assert [e["filter"] for e in rows] == [2, 0] and rows[0]["window"] == "ness⟩"
    assert m.category_counts() == {1: {"capitals": 1}, 2: {"word-internal": 1, "suffix": 1}}
    assert format_ngrams(m.atlas[0]["ngrams"]) == "g0 1.00"
    m.model_changed("abc")
    assert m.atlas == [] and m.sweep is None and m.checksum == "abc"


def test_a_search_is_cut_after_the_width_is_chosen():
    """The view cut the search to its 200 best hits of every width and then kept the chosen
    width: narrow filters far down the list were hidden (an empty table for 'e' at width 1,
    where ``chars filters --search e --width 1`` lists ten). Now the width first, then the cut."""
    from elmo_explorer.views.characters.model import SEARCH_ROWS

    m = CharactersModel()
    m.atlas = [_entry(j, 1 if j >= 250 else 3) for j in range(260 + SEARCH_ROWS)]
    m.search = "e"
    m.search_hits = [{"filter": j, "relative": 1 - j / 1000, "window": "e", "value": 1.0}
                     for j in range(260 + SEARCH_ROWS)]
    m.width = 3
    assert [e["filter"] for e in m.atlas_rows()] == list(range(SEARCH_ROWS))
    m.width = 1
    assert [e["filter"] for e in m.atlas_rows()] == list(range(250, 250 + SEARCH_ROWS))


def test_sweep_table_and_repaired_types():
    m = CharactersModel()
    assert m.sweep_table() == ([], [], [])
    m.sweep = {"word": "river", "layers": [0, 1, 2], "sentences": ["a river"],
               "variants": [], "mean_per_type": {
                   "delete 1": [[0.6] * 3, [0.7, 0.7, 0.75], [0.8, 0.82, 0.9]],
                   "case": [[0.5] * 3, [0.3, 0.3, 0.3], [0.4, 0.45, 0.35]]}}
    rows, cols, values = m.sweep_table()
    assert rows == ["delete 1", "case"]
    assert cols == ["L0", "L1 fwd", "L1 bwd", "L2 fwd", "L2 bwd"]
    assert values[0] == [0.6, 0.7, 0.75, 0.82, 0.9]
    assert m.repaired() == ["delete 1"]


def test_nonce_columns():
    m = CharactersModel()
    assert m.nonce_columns() == []
    m.nonce = {"layer0_neighbours": [["blood", 0.67]], "forward_predictions": [["floor", 0.03]],
               "backward_predictions": [["side", 0.05]], "both_agree": [["side", 0.09]]}
    cols = m.nonce_columns()
    assert [c[1] for c in cols] == [[("blood", 0.67)], [("floor", 0.03)], [("side", 0.05)],
                                    [("side", 0.09)]]
    m.model_changed("new")
    assert m.nonce is None


def test_state_round_trips_and_bad_values_are_ignored():
    m = CharactersModel(words_text="teh", filters_shown=20, sentence="a b", word="b",
                        search="un-", width=3, nonce_sentence="a wug", nonce_word="wug")
    other = CharactersModel()
    other.restore(m.view_state())
    assert other.view_state() == m.view_state()
    other.restore({"filters": 0, "width": "x", "words": 5, "sentence": None})
    assert other.view_state() == m.view_state()
    other.restore("not a dict")                               # type: ignore[arg-type]
    assert other.words_text == "teh"


def test_vocabulary_and_index_choices_round_trip_and_fall_back():
    m = CharactersModel()
    assert (m.vocab_source, m.index_source) == (VocabSource.REFERENCE, IndexSource.CORPUS)
    assert m.vocabulary_label() == "Reference corpus" and m.index_label() == "The Corpus view's index"
    m.set_vocabulary(VocabSource.FILE, "/data/words.txt")
    m.set_index(IndexSource.FOLDER, "/data/ix")
    assert m.vocabulary_label() == "File: words.txt" and m.index_label() == "Index: ix"
    other = CharactersModel()
    other.restore(m.view_state())
    assert (other.vocab_source, other.vocab_file) == (VocabSource.FILE, "/data/words.txt")
    assert (other.index_source, other.index_folder) == (IndexSource.FOLDER, "/data/ix")
    m.set_vocabulary(VocabSource.MODEL)                     # the file is remembered
    assert m.vocab_file == "/data/words.txt" and m.view_state()["vocabulary"] == "model"
    # a file or folder choice without its path, or an unknown value, is not taken
    fresh = CharactersModel()
    fresh.restore({"vocabulary": "file", "index": "folder"})
    assert (fresh.vocab_source, fresh.index_source) == (VocabSource.REFERENCE, IndexSource.CORPUS)
    fresh.restore({"vocabulary": "elsewhere", "index": 3, "vocabulary_file": 7})
    assert (fresh.vocab_source, fresh.index_source, fresh.vocab_file) == (
        VocabSource.REFERENCE, IndexSource.CORPUS, "")


def test_nonce_occurrences_are_keyword_in_context_centred_on_the_word():
    m = CharactersModel()
    assert m.nonce_kwic() == []
    long_left = " ".join(["word"] * 20)
    m.nonce_hits = {2: [{"text": "she sat on the bank .", "position": 4, "cosine": 0.91},
                        {"text": long_left + " bank of it", "position": 20, "cosine": 0.5}],
                    0: [{"text": "a river", "position": 1, "cosine": 0.7}]}
    out = m.nonce_kwic(width=16)
    assert [layer for layer, _ in out] == [0, 2]
    (c1, l1, w1, r1), (c2, l2, w2, r2) = out[1][1]
    assert (c1, w1, r1) == (0.91, "bank", ".") and l1 == "  she sat on the"
    assert len(l1) == len(l2) == 16 and l2.startswith("…") and r2 == "of it"
    assert f"{l1} [{w1}] {r1}" == kwic_line("she sat on the bank .".split(), 4, 16)
    m.model_changed("another")
    assert m.nonce_hits == {} and m.nonce_index == ""
