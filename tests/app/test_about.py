"""Help → About carries the bundled model's attribution (both training corpora)."""
from __future__ import annotations

import pytest

pytest.importorskip("PySide6")

from elmo_engine.resources import demo_checkpoint_path, demo_model_attribution
from elmo_explorer.shell.dialogs import about_text


def test_about_names_both_corpora():
    if not (demo_checkpoint_path() / "ATTRIBUTION.txt").is_file():
        pytest.skip("demo model attribution not installed")
    text = about_text("1.2.3")
    assert "1.2.3" in text
    assert "OpenStax" in text and "CC BY 4.0" in text
    assert "Standard Ebooks" in text and "public domain" in text
    # the attribution file's paragraphs appear escaped, each once
    paragraphs = demo_model_attribution().split("\n\n")
    assert len(paragraphs) == 2
    assert text.count("<small>") == 2
