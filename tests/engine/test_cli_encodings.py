"""Round seven (docs/guide/hardening.md): bytes that are not UTF-8 and streams that are not
UTF-8, at the command line.

A file name whose bytes are not UTF-8 is refused while parsing (it could be read, but not
written into the results, manifests, records and reports that name their inputs, which failed
after the work); an error line stays one line (a newline or a right-to-left override in a file
name escaped); stdout and stderr never fail on a character their encoding lacks (``--help``
under ASCII printed a traceback); JSON on such a stream is all-ASCII; a target name of 240
UTF-8 bytes is written (its temporary name no longer goes over 255 bytes).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hardening_helpers import cli

from elmo_engine.cli.main import main


def _raw_name(folder, name: bytes) -> str:
    """A file in ``folder`` named with ``name``'s bytes, as Python gives it back (surrogates)."""
    raw = os.fsencode(str(folder)) + b"/" + name
    with open(raw, "wb") as fh:
        fh.write(b"the bank of the river\n")
    return os.fsdecode(raw)


@pytest.mark.parametrize("make_argv", [
    lambda bad, ok, out: ["embed", bad, "-o", out],
    lambda bad, ok, out: ["embed", ok, "-o", bad + ".hdf5"],
    lambda bad, ok, out: ["info", "--checkpoint", bad],
    lambda bad, ok, out: ["index", ok, "-o", bad + "-index"],
    lambda bad, ok, out: ["train-lm", bad, "--dev", ok, "-o", out + "-model"],
    lambda bad, ok, out: ["report", ok, "--word", "bank", "-o", out + "-r", "--workspace",
                          bad + ".elmows.json"],
])
def test_a_file_name_that_is_not_utf8_is_refused_while_parsing(tmp_path, capsys, make_argv):
    bad = _raw_name(tmp_path, b"s\xffx.txt")
    ok = _raw_name(tmp_path, b"plain.txt")
    before = sorted(os.listdir(os.fsencode(str(tmp_path))))
    argv = make_argv(bad, ok, str(tmp_path / "out"))
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 1 and len(err.strip().splitlines()) == 1, err
    assert "the file name is not UTF-8: byte 0xFF at byte" in err and "rename it" in err
    assert sorted(os.listdir(os.fsencode(str(tmp_path)))) == before      # nothing written


def test_an_error_naming_a_file_with_a_newline_or_an_override_stays_one_line(tmp_path, capsys):
    for name in ("bad\nname.txt", "bad\u202ename.txt"):
        code, err = cli(["embed", str(tmp_path / name), "-o", tmp_path / "v.hdf5"], capsys)
        assert code == 1 and "No such file" in err
        assert ("bad\\x0aname.txt" in err) if "\n" in name else ("bad\\u202ename.txt" in err)
    from elmo_engine.files import shown

    assert shown("caf\udce9 é 😀 e\u0301") == "caf\\xe9 é 😀 e\u0301"     # only what must be


def _run(argv, **env):
    full = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-m", "elmo_explorer.entry", *argv], env=full,
                          capture_output=True, timeout=120)


def test_streams_that_are_not_utf8_never_fail_on_a_character():
    """``--help`` under ASCII stdout printed a traceback (’ ‖ ≥ in the help); ``info --json``
    under Latin-1 failed after its work; now the help is written with ``\\u2016`` escapes and
    the JSON is all-ASCII, read back the same."""
    r = _run(["embed", "--help"], PYTHONIOENCODING="ascii")
    assert r.returncode == 0 and b"Traceback" not in r.stderr, r.stderr
    assert b"usage: elmo-explorer embed" in r.stdout and r.stdout.isascii()
    r = _run(["info", "--json"], PYTHONIOENCODING="latin-1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.isascii()
    doc = json.loads(r.stdout)
    utf8 = json.loads(_run(["info", "--json"], PYTHONIOENCODING="utf-8").stdout.decode("utf-8"))
    assert doc == utf8


def test_every_command_prints_its_json_through_print_json():
    """``search --json`` and ``senses --json`` printed their own ``json.dumps(…,
    ensure_ascii=False)``: on an ASCII stdout that became ``"caf\\xe9"``, invalid JSON."""
    import re
    from pathlib import Path

    import elmo_engine.cli as cli_pkg

    own = {p.name: p.read_text("utf-8") for p in Path(cli_pkg.__file__).parent.glob("*.py")}
    assert len(own) > 20
    printing = sorted(name for name, text in own.items()
                      if re.search(r"print\(\s*json\.dumps", text) and name != "common.py")
    assert printing == []


def test_utf8_words_read_as_ascii_are_decoded_and_a_file_named_so_is_explained(tmp_path):
    """``LC_ALL=POSIX`` with ``PYTHONUTF8=0``: Python reads the command line as ASCII, so a
    UTF-8 ``café`` came in escaped and was refused as "not UTF-8"; a word is decoded now, and a
    file so named is refused with the way out."""
    env = {"LC_ALL": "POSIX", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0",
           "PYTHONIOENCODING": ""}
    probe = subprocess.run([sys.executable, "-c", "import sys; print(sys.getfilesystemencoding())"],
                           env=dict(os.environ, **env), capture_output=True, text=True)
    if probe.stdout.strip().lower().replace("-", "") == "utf8":
        pytest.skip("this Python reads the command line as UTF-8 under the POSIX locale")
    r = _run(["chars", "word", "café", "--json"], **env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["words"][0]["word"] == "café"
    name = _raw_name(tmp_path, "é.txt".encode("utf-8"))
    r = _run(["embed", name, "-o", str(tmp_path / "v.npz")], **env)
    assert r.returncode == 1 and b"PYTHONUTF8=1" in r.stderr, r.stderr


def test_a_target_of_240_utf8_bytes_is_written_and_no_temporary_is_left(tmp_path, capsys):
    from elmo_engine.atomic import NAME_MAX_BYTES, atomic_write_text, fitting_name

    name = "é" * 118 + ".txt"                                   # 240 bytes, a valid name
    assert len(name.encode()) == 240
    atomic_write_text(tmp_path / name, "x\n")
    assert [p.name for p in tmp_path.iterdir()] == [name]
    cut = fitting_name(name, 30)
    assert len(cut.encode()) <= NAME_MAX_BYTES - 30 and name.startswith(cut.split("~")[0])
    assert fitting_name("short", 30) == "short"
    assert fitting_name("é" * 125 + "a", 30) != fitting_name("é" * 125 + "b", 30)
    sentences = tmp_path / "s.txt"
    sentences.write_text("the bank\n", encoding="utf-8")
    folder = tmp_path / "r"
    folder.mkdir()
    out = folder / ("é" * 120)                                  # 240 bytes, a folder output
    code, err = cli(["export", "vectors", sentences, "-o", out, "--format", "tsv"], capsys)
    assert code == 0, err
    assert [p.name for p in folder.iterdir()] == [out.name]


def test_the_temporaries_of_long_names_are_cleaned_and_only_their_own(tmp_path):
    """A review: ``atomic_path`` cut a long name to leave room for its suffix, the cleanup for
    ``.part`` only, so a killed write's temporary of a long name was never removed; two long
    names sharing their start must not remove each other's."""
    import time

    from elmo_engine.atomic import atomic_path, cleanup_stale_parts

    a, b = "é" * 119 + "a.txt", "é" * 119 + "b.txt"          # 243 bytes each
    for name in (a, b):
        with pytest.raises(KeyboardInterrupt):
            with atomic_path(tmp_path / name) as tmp:
                tmp.write_text("half", "utf-8")
                os.link(tmp, tmp.with_name(tmp.name + "-kept.part"))   # what a kill leaves
                raise KeyboardInterrupt
    kept = sorted(p.name for p in tmp_path.iterdir())
    assert len(kept) == 2 and all(n.endswith("-kept.part") for n in kept)
    old = time.time() - 3600
    for n in kept:
        os.utime(tmp_path / n, (old, old))
    assert cleanup_stale_parts(tmp_path, target=a) == 1
    assert cleanup_stale_parts(tmp_path, target=b) == 1
    assert list(tmp_path.iterdir()) == []


def test_the_log_of_an_unexpected_error_takes_any_message(tmp_path, monkeypatch, capsys):
    from elmo_engine.cli.last_resort import report_unexpected

    monkeypatch.setenv("ELMO_EXPLORER_LOG_DIR", str(tmp_path))
    assert report_unexpected(ValueError("s\udcff"), "embed") == 1
    captured = capsys.readouterr()
    assert "Logging error" not in captured.err and "s\\xff" in captured.err
    assert "ValueError: s\\udcff" in (tmp_path / "cli-errors.log").read_text("utf-8")


def test_a_utf16_file_is_named_as_such(tmp_path, capsys):
    f = tmp_path / "s.txt"
    f.write_bytes("the bank\n".encode("utf-16"))
    code, err = cli(["embed", f, "-o", tmp_path / "v.hdf5"], capsys)
    assert code == 1 and f"{f}: is UTF-16 text" in err and "save it as UTF-8" in err


def test_json_a_user_edits_may_start_with_a_byte_order_mark(tmp_path, capsys):
    """A workspace, an options.json and a bilm.json saved by a Windows editor start with a
    BOM: read (they were "not valid JSON"), and the output guard reads the workspace as the
    command does, so its checkpoint folder stays an input."""
    from hardening_helpers import ckpt, snapshot, workspace

    from elmo_engine.io.workspace_file import load_workspace
    from elmo_engine.model.checkpoint import load_checkpoint

    ck = ckpt(tmp_path)
    options = ck / "options.json"
    options.write_bytes(b"\xef\xbb\xbf" + options.read_bytes())
    assert load_checkpoint(ck).opts.output_dim > 0
    ws = workspace(tmp_path, ck)
    ws.write_bytes(b"\xef\xbb\xbf" + ws.read_bytes())
    assert load_workspace(ws).data.sentences[0] == "the bank of the river"
    before = snapshot(ck)
    code, err = cli(["export", "report", ws, "-o", ck, "--force"], capsys)
    assert code == 1 and str(ck) in err
    assert snapshot(ck) == before


def test_a_workspace_holding_a_lone_surrogate_is_refused_naming_the_key(tmp_path):
    """A JSON ``"\\udcff"`` escape: taken, the sentence was embedded with it, shown without it
    (Qt drops it) and the next save failed."""
    from hardening_helpers import ckpt, workspace

    from elmo_engine.errors import InputError
    from elmo_engine.io.workspace_file import load_workspace

    ws = workspace(tmp_path, ckpt(tmp_path))
    doc = json.loads(ws.read_text("utf-8"))
    doc["sentences"][1] = "caf\udcff au lait"
    ws.write_text(json.dumps(doc), "utf-8")                 # ensure_ascii: the \udcff escape
    assert "\\udcff" in ws.read_text("utf-8")
    with pytest.raises(InputError, match=r"'sentences\[1\]' holds U\+DCFF at character 4"):
        load_workspace(ws)


def test_a_workspace_save_that_cannot_be_written_whole_writes_nothing(tmp_path):
    """Text that is not UTF-8 (a checkpoint path holding such bytes), and an arrays file whose
    name would pass 255 bytes, are refused before the arrays file is written."""
    import numpy as np

    from elmo_engine.errors import ElmoError, InputError
    from elmo_engine.io.workspace_file import CheckpointRef, WorkspaceData, save_workspace

    data = WorkspaceData(sentences=["the bank"], checkpoint=CheckpointRef(path="/m/ck\udcff"),
                         arrays={"x": np.zeros(3, np.float32)})
    with pytest.raises(InputError,
                       match=r"checkpoint.path. holds U\+DCFF at character 6 \(./m/ck\\xff.\)"):
        save_workspace(tmp_path / "w.elmows.json", data)
    data.checkpoint = CheckpointRef(path="/m/ck")
    with pytest.raises(ElmoError, match="file names take at most 255"):
        save_workspace(tmp_path / ("é" * 121 + ".elmows.json"), data)    # 254 bytes: valid
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("reader", ["sentences", "lm pairs", "lm vocab", "chars vocab",
                                    "options", "options with a BOM"])
def test_every_reader_says_not_utf8_alike(tmp_path, capsys, reader):
    """A review: five wordings ("not UTF-8", "(byte 8)", "not valid UTF-8 (byte 0xe9 at
    column 4)" …) for one problem; now one, with the byte and its line and column
    (``files.not_utf8``)."""
    from hardening_helpers import ckpt

    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"the bank\nthe caf\xe9 au lait\n")
    sentences = tmp_path / "s.txt"
    sentences.write_text("the bank\n", encoding="utf-8")
    ck = ckpt(tmp_path)
    argv = {"sentences": ["embed", bad, "-o", tmp_path / "v.hdf5"],
            "lm pairs": ["lm", "--pairs", bad],
            "lm vocab": ["lm", sentences, "--vocab", bad],                # the demo model
            "chars vocab": ["chars", "word", "bank", "--vocab", bad],
            "options": ["info", "--checkpoint", ck],
            "options with a BOM": ["info", "--checkpoint", ck]}[reader]
    if reader.startswith("options"):        # the place counts from the file's start, BOM or not
        bom = b"\xef\xbb\xbf" if "BOM" in reader else b""
        (ck / "options.json").write_bytes(bom + b"{\n  \"caf\xe9\": 1}")
    code, err = cli(argv, capsys)
    assert code == 1
    if reader in ("sentences", "chars vocab"):            # read a line at a time
        assert "bad.txt:2: not valid UTF-8 (byte 0xE9 at column 8)" in err, err
    elif reader.startswith("options"):
        assert "not valid UTF-8 (byte 0xE9 at line 2, column 7)" in err, err
    else:
        assert "not valid UTF-8 (byte 0xE9 at line 2, column 8)" in err, err


def test_the_model_config_training_state_and_wordnet_say_not_utf8_alike(tmp_path):
    """The last three readers with their own wording ("'utf-8' codec can't decode byte 0xe9
    in position 12: invalid continuation byte") say it as every other reader does."""
    import zipfile

    from elmo_engine.errors import CheckpointError, InputError
    from elmo_engine.io.datasets.wordnet import load_wordnet
    from elmo_engine.model.header import read_native_config
    from elmo_engine.train.names import STATE_DIR, STATE_JSON, STATE_TENSORS
    from elmo_engine.train.state_io import load_state

    bad = b'{\n  "caf\xe9": 1}'
    said = r"not valid UTF-8 \(byte 0xE9 at line 2, column 7\)"
    cfg = tmp_path / "bilm.json"
    cfg.write_bytes(b"\xef\xbb\xbf" + bad)                 # a BOM is allowed, and not counted
    with pytest.raises(CheckpointError, match="bilm.json.*" + said):
        read_native_config(cfg)
    state = tmp_path / "run" / STATE_DIR
    state.mkdir(parents=True)
    (state / STATE_JSON).write_bytes(bad)
    (state / STATE_TENSORS).write_bytes(b"")
    with pytest.raises(CheckpointError, match="state.json.*cannot read training state.*" + said):
        load_state(tmp_path / "run")
    wn = tmp_path / "wordnet"
    wn.mkdir()
    (wn / "index.sense").write_bytes(b"bank%1:14:00:: 08420278 1 25\ncaf\xe9%1:06:00:: 1 1 0\n")
    with pytest.raises(InputError, match=r"index.sense.*not valid UTF-8 \(byte 0xE9 at line 2, "
                                         r"column 4\)"):
        load_wordnet(wn)
    with zipfile.ZipFile(tmp_path / "wordnet.zip", "w") as zf:
        zf.writestr("wordnet/index.sense", (wn / "index.sense").read_bytes())
    with pytest.raises(InputError, match=r"wordnet.zip:wordnet/index.sense.*not valid UTF-8"):
        load_wordnet(tmp_path / "wordnet.zip")


def test_the_workspace_results_and_training_vocabulary_readers_say_not_utf8_alike(tmp_path):
    """The readers that still wrapped ``not_utf8`` by hand now decode with ``files.utf8_text``:
    the same words, a BOM dropped and not counted in the place."""
    from elmo_engine.cli.report import read_layers_result
    from elmo_engine.errors import InputError
    from elmo_engine.io.workspace_file import load_workspace
    from elmo_engine.train.vocab import Vocabulary

    bad = b'{\n  "caf\xe9": 1}'
    said = r"not valid UTF-8 \(byte 0xE9 at line 2, column 7\)"
    ws = tmp_path / "w.elmows.json"
    ws.write_bytes(b"\xef\xbb\xbf" + bad)
    with pytest.raises(InputError, match=r"w.elmows.json: not a workspace file: " + said):
        load_workspace(ws)
    res = tmp_path / "layers.json"
    res.write_bytes(bad)
    with pytest.raises(InputError, match=r"layers.json: the .*: " + said):
        read_layers_result(res)
    vocab = tmp_path / "vocab.txt"
    vocab.write_bytes(b"<S>\n</S>\ncaf\xe9\n")
    with pytest.raises(InputError, match=r"vocab.txt: vocabulary: not valid UTF-8 \(byte 0xE9 "
                                         r"at line 3, column 4\)"):
        Vocabulary.load(vocab)
