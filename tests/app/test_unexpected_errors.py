"""The app's last-resort handler (issue 18): an unexpected error, a MemoryError included, ends
the app with one line on stderr, its traceback in the log file, and exit status 1."""
from __future__ import annotations

import pytest

from elmo_explorer.shell import main as app_main


@pytest.mark.parametrize("exc, words", [(MemoryError(), "out of memory"),
                                        (KeyError("x"), "unexpected KeyError")])
def test_unexpected_error_is_one_line_and_logged(tmp_path, capsys, monkeypatch, exc, words):
    def boom(*args, **kwargs):
        raise exc

    monkeypatch.setattr(app_main, "_run", boom)
    code = app_main.main(["--settings-dir", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == 1 and words in err and "\n" not in err and "Traceback" not in err
    log = (tmp_path / "data" / "logs" / "elmo-explorer.log").read_text(encoding="utf-8")
    assert "unexpected error" in log and "Traceback" in log and type(exc).__name__ in log


def test_bad_sentences_file_is_one_line(tmp_path, capsys):
    bad = tmp_path / "s.txt"
    bad.write_bytes(b"ok\nbad\x00\n")
    code = app_main.main(["--settings-dir", str(tmp_path), "--sentences", str(bad)])
    err = capsys.readouterr().err.strip()
    assert code == 1 and "s.txt:2: holds NUL bytes" in err and "\n" not in err
