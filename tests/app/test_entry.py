"""The ``elmo-explorer`` command's entry point (issue 39): ``--version`` and an output that exists
answer without importing torch or Qt; ``--help`` lists the app's own options beside the
commands; the no-display message and ``--view`` name every view of the one list
(:mod:`elmo_explorer.shell.view_names`)."""
from __future__ import annotations

from pathlib import Path

from elmo_explorer.shell.startup import NO_DISPLAY_HINT
from elmo_explorer.shell.view_names import VIEW_CHOICES, VIEWS
from import_check import heavy, run_importtime

ENTRY = "elmo_explorer.entry"


def test_version_imports_neither_torch_nor_qt():
    code, out, err, imported = run_importtime(["--version"], ENTRY)
    assert code == 0 and out.strip() and err == ""
    assert heavy(imported) == []


def test_embed_to_an_existing_file_imports_neither_torch_nor_qt(tmp_path: Path):
    text = tmp_path / "in.txt"
    text.write_text("He sat on the bank .\n", encoding="utf-8")
    existing = tmp_path / "vectors.hdf5"
    existing.write_bytes(b"keep me")
    code, out, err, imported = run_importtime(["embed", str(text), "-o", str(existing)], ENTRY)
    assert code == 1 and out == ""
    assert err.strip() == f"elmo-explorer: error: {existing} exists; pass --force to overwrite it"
    assert heavy(imported) == [] and existing.read_bytes() == b"keep me"


def test_help_lists_the_app_options_the_views_and_the_commands():
    code, out, _err, imported = run_importtime(["--help"], ENTRY)
    assert code == 0 and heavy(imported) == []
    for option in ("--settings-dir", "--size", "--sentences", "--screenshot", "--view",
                   "--checkpoint", "--timeout", "--version"):
        assert option in out, option
    flat = " ".join(out.split())
    assert f"view to show first: {', '.join(VIEW_CHOICES)}" in flat
    for command in ("embed", "info", "models", "layers", "export"):
        assert f"    {command} " in out, command


def test_the_no_display_message_names_every_view():
    assert VIEWS == ("contexts", "projection", "probes", "layers", "language-model", "corpus",
                     "characters", "units")
    assert f"[--view {'|'.join(VIEWS)}]" in NO_DISPLAY_HINT
