"""The contexts view and ``elmo-explorer contexts --neighbours`` build the same neighbour index
(issue 16, item 5): the same vocabulary file for layer 0's known words. The CLI side is
checked end to end in tests/engine/test_cli_conventions.py against the engine functions the
view calls."""
from __future__ import annotations

import pytest

pytest.importorskip("pytestqt")

from elmo_engine.analysis.contexts.neighbour_corpus import vocabulary_file as engine_vocabulary
from elmo_engine.model.checkpoint import load_checkpoint
from elmo_engine.resources import demo_checkpoint_path
from elmo_explorer.views.contexts.neighbours import vocabulary_file


def test_the_view_and_the_cli_read_the_same_vocabulary(tiny_checkpoint, tmp_path):
    info = load_checkpoint(tiny_checkpoint).info
    assert vocabulary_file(info) == engine_vocabulary(info.options_path)
    assert vocabulary_file(info) == demo_checkpoint_path() / "vocab.txt"   # none beside it
    assert vocabulary_file(None) == engine_vocabulary(None)
    own = tmp_path / "ck"
    own.mkdir()
    for f in tiny_checkpoint.iterdir():
        (own / f.name).write_bytes(f.read_bytes())
    (own / "vocab.txt").write_text("<S>\nriverbank\n", encoding="utf-8")
    info = load_checkpoint(own).info
    assert vocabulary_file(info) == engine_vocabulary(info.options_path) == own / "vocab.txt"
