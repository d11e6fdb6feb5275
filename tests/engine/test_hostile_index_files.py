"""Issue 38 ("hardening, round four"), the files of a corpus index as `search`, `senses` and a
resumed `index` read them (docs/guide/hardening.md, round four, "Downloads and index files").

One small index (the vendored tiny model, 30 sentences, shards kept) is built once; each test
damages a copy: a FIFO or a device in place of a file, a truncated, foreign or renumbered
``tokens.sqlite``, ``index.json`` and shard JSON with wrong types, ``Infinity`` or deep
nesting, a faiss file that declares more than it holds. Every case ends with status 1 and one
line naming the file, no traceback; the FIFO cases run in a child process that would hang on
a reader without the regular-file check, the faiss case in one whose peak memory is measured.
"""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from hardening_helpers import cli

from elmo_engine.cli.main import main
from elmo_engine.errors import InputError
from elmo_engine.index.store import read_manifest, read_shard

from support import FIXTURES, REPO

TINY = FIXTURES / "allennlp"
CORPUS = REPO / "resources" / "reference_corpus" / "sentences.txt"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(
    [str(REPO), str(REPO / "app"), str(REPO / "tests"), os.environ.get("PYTHONPATH", "")])}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    d = tmp_path_factory.mktemp("round4_index")
    corpus = d / "corpus.txt"
    corpus.write_text("\n".join(CORPUS.read_text("utf-8").splitlines()[:30]) + "\n", "utf-8")
    assert main(["index", str(corpus), "--out", str(d / "ix"), "--checkpoint", str(TINY),
                 "--shard-size", "7", "--device", "cpu", "--layer", "1", "--ann-m", "8",
                 "--keep-shards"]) == 0
    return corpus, d / "ix"


@pytest.fixture()
def ix(built, tmp_path):
    dst = tmp_path / "ix"
    shutil.copytree(built[1], dst)
    return dst


def search(folder: Path, *extra: str):
    return ["search", str(folder), "--sentence", "the bank of the river", "--word", "the",
            "--checkpoint", str(TINY), "--device", "cpu", *extra]


def senses(folder: Path):
    return ["senses", str(folder), "--word", "the", "--layer", "1"]


def one_line_naming(argv, capsys, name: str) -> str:
    code, err = cli(argv, capsys)
    assert code == 1 and name in err, err
    return err


def test_the_undamaged_index_answers(ix, capsys):
    assert main(search(ix, "--json")) == 0
    hits = json.loads(capsys.readouterr().out)["hits"]
    assert len(hits) == 10 and all(h["word"].casefold() == "the" for h in hits)
    assert main(search(ix, "--json", "--any-word")) == 0
    assert len(json.loads(capsys.readouterr().out)["hits"]) == 10
    assert main(senses(ix)) == 0


# ---- FIFOs and devices (a child process: a reader that waits would hang here) -----------------
_CHILD = """
import contextlib, io, json, sys
from elmo_engine.cli.main import main
out = []
for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    out.append([code, err.getvalue()])
print(json.dumps(out))
"""


def run_child(cases, timeout=120):
    r = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(cases)], capture_output=True,
                       text=True, timeout=timeout, env=ENV)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_fifos_and_devices_in_an_index_are_refused_without_waiting(built, tmp_path):
    corpus, source = built
    cases, names = [], []
    for name, extra in (("vectors.L1.npy", ()), ("tokens.sqlite", ()),
                        ("ann.L1.faiss", ("--any-word",)), ("index.json", ())):
        folder = tmp_path / f"fifo_{name}"
        shutil.copytree(source, folder)
        (folder / name).unlink()
        os.mkfifo(folder / name)
        cases.append(search(folder, *extra))
        names.append((name, "FIFO"))
    folder = tmp_path / "device"
    shutil.copytree(source, folder)
    (folder / "vectors.L1.npy").unlink()
    (folder / "vectors.L1.npy").symlink_to("/dev/zero")
    cases.append(search(folder))
    names.append(("vectors.L1.npy", "a device"))
    # a shard's vectors as a FIFO, read when an unfinished index is resumed
    folder = tmp_path / "shard"
    shutil.copytree(source, folder)
    m = json.loads((folder / "index.json").read_text())
    m["complete"] = False
    (folder / "index.json").write_text(json.dumps(m))
    shard = folder / "shards" / "s000001.L1.npy"
    shard.unlink()
    os.mkfifo(shard)
    cases.append(["index", str(corpus), "--out", str(folder), "--checkpoint", str(TINY),
                  "--shard-size", "7", "--device", "cpu", "--layer", "1", "--ann-m", "8"])
    names.append(("s000001.L1.npy", "FIFO"))
    for (code, err), (name, kind) in zip(run_child(cases), names):
        lines = [ln for ln in err.strip().splitlines() if "error" in ln]     # no progress lines
        assert code == 1 and len(lines) == 1 and "Traceback" not in err, (name, err)
        assert name in lines[0] and kind in lines[0], (name, err)


# ---- tokens.sqlite ----------------------------------------------------------------------------
def test_a_truncated_token_table_is_one_line(ix, capsys):
    db = ix / "tokens.sqlite"
    data = db.read_bytes()
    db.write_bytes(data[:len(data) // 2])
    one_line_naming(search(ix), capsys, "tokens.sqlite")
    one_line_naming(senses(ix), capsys, "tokens.sqlite")


def test_bytes_that_are_not_a_database_are_one_line(ix, capsys):
    (ix / "tokens.sqlite").write_bytes(os.urandom(8192))
    err = one_line_naming(search(ix), capsys, "tokens.sqlite")
    assert "rebuild the index" in err


def test_a_foreign_database_is_one_line(ix, capsys):
    db = ix / "tokens.sqlite"
    db.unlink()
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    con.commit()
    con.close()
    err = one_line_naming(search(ix), capsys, "tokens.sqlite")
    assert "table 'sentences' has columns []" in err


def test_a_token_table_with_rows_missing_is_one_line(ix, capsys):
    con = sqlite3.connect(ix / "tokens.sqlite")
    con.execute("DELETE FROM tokens WHERE row = (SELECT MAX(row) FROM tokens)")
    con.commit()
    con.close()
    err = one_line_naming(search(ix), capsys, "tokens.sqlite")
    assert "'tokens' numbered 0.." in err


def test_a_token_table_with_holes_or_wrong_types_is_one_line(ix, capsys):
    con = sqlite3.connect(ix / "tokens.sqlite")
    con.execute("DELETE FROM tokens WHERE row IN (SELECT row FROM tokens WHERE folded = 'the' "
                "ORDER BY row LIMIT 1 OFFSET 1)")
    con.execute("UPDATE tokens SET position = 'x' WHERE row = (SELECT row FROM tokens WHERE "
                "folded = 'the' ORDER BY row LIMIT 1)")
    con.commit()
    con.close()
    err = one_line_naming(search(ix, "--any-word"), capsys, "tokens.sqlite")
    assert "malformed" in err or "is not in the token table" in err


# ---- index.json and shard JSON ----------------------------------------------------------------
@pytest.mark.parametrize("field,value", [
    ("dim", '"32"'), ("layers", "[1.5]"), ("layers", "[true]"), ("n_tokens", "Infinity"),
    ("n_sentences", "1e400"), ("shard_size", "NaN"),
    ("corpus", '[{"path": 3, "size": 1, "sha256": "x"}]'), ("reading", "[]"),
    ("ann", '{"m": "many"}'), ("dim", "32.0"), ("complete", '"yes"')])
def test_index_json_with_wrong_types_is_one_line(ix, capsys, field, value):
    path = ix / "index.json"
    m = json.loads(path.read_text())
    m[field] = "@@"
    path.write_text(json.dumps(m).replace('"@@"', value))
    one_line_naming(search(ix), capsys, "index.json")
    one_line_naming(senses(ix), capsys, "ix")


def test_deeply_nested_index_json_names_the_file(ix, capsys):
    (ix / "index.json").write_text("[" * 200_000 + "]" * 200_000)
    err = one_line_naming(search(ix), capsys, "index.json")
    assert "nested too deeply" in err


@pytest.mark.parametrize("field,value", [
    ("sentences", "ints"), ("sentences", "number"), ("first_sentence", "7.0"),
    ("n_tokens", "true")])
def test_shard_json_with_wrong_types_names_the_shard(ix, field, value):
    path = ix / "shards" / "s000001.json"
    doc = json.loads(path.read_text())
    if value == "ints":                         # as many tokens, numbers instead of words
        doc["sentences"][0] = list(range(len(doc["sentences"][0])))
    elif value == "number":
        doc["sentences"][0] = 5
    elif value == "true":                       # a one-sentence count that only bool() equals
        doc["n_tokens"] = True
        doc["sentences"] = [["w"]] + [[] for _ in doc["sentences"][1:]]
    else:
        doc[field] = json.loads(value)
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError, match="s000001.json"):
        read_shard(ix, 1, read_manifest(ix))


def test_deeply_nested_shard_json_names_the_shard(ix):
    (ix / "shards" / "s000002.json").write_text("{\"a\":" * 100_000 + "1" + "}" * 100_000)
    with pytest.raises(InputError, match=r"s000002\.json.*nested too deeply"):
        read_shard(ix, 2, read_manifest(ix))


def test_a_vectors_file_far_bigger_than_its_shape_is_refused_before_mapping(ix, capsys):
    vec = ix / "vectors.L1.npy"
    with open(vec, "r+b") as fh:
        fh.truncate(2 << 30)                            # sparse: 2 GiB, nothing on disk
    err = one_line_naming(search(ix), capsys, "vectors.L1.npy")
    assert "float16 take at most" in err


# ---- the faiss file ---------------------------------------------------------------------------
def _levels_offset(data: bytes) -> int:
    """Where the faiss file's count of per-node levels is (after the header and two vectors)."""
    off = 4 + 33                                        # fourcc, d, ntotal, 2 dummies, flags
    (k,) = struct.unpack_from("<Q", data, off)
    off += 8 + 8 * k                                    # level probabilities (double)
    (k,) = struct.unpack_from("<Q", data, off)
    return off + 8 + 4 * k                              # links per level (int32)


_MEASURE = """
import json, sys
from pathlib import Path
from elmo_engine.errors import InputError
from elmo_engine.index.ann import AnnIndex, AnnSettings
try:
    AnnIndex(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), AnnSettings(m=8))
    msg = "read"
except InputError as e:
    msg = str(e)
# VmHWM: this process's own peak (ru_maxrss would carry pytest's across the exec)
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
print(json.dumps([msg, hwm]))
"""


def test_a_faiss_file_declaring_3e8_elements_is_refused_before_faiss_reads_it(ix, capsys):
    ann = ix / "ann.L1.faiss"
    data = bytearray(ann.read_bytes())
    off = _levels_offset(data)
    m = read_manifest(ix)
    assert struct.unpack_from("<Q", data, off)[0] == m.n_tokens
    struct.pack_into("<Q", data, off, 300_000_000)
    ann.write_bytes(bytes(data))
    r = subprocess.run([sys.executable, "-c", _MEASURE, str(ann), str(m.n_tokens), str(m.dim)],
                       capture_output=True, text=True, timeout=120, env=ENV)
    msg, peak_kb = json.loads(r.stdout.strip().splitlines()[-1])
    assert "levels: 300000000 entries where the index needs" in msg and "ann.L1.faiss" in msg
    assert peak_kb < 1_000_000                                  # KiB: well under 1 GB
    one_line_naming(search(ix, "--any-word"), capsys, "ann.L1.faiss")


def test_a_faiss_link_out_of_range_is_refused(ix, capsys):
    ann = ix / "ann.L1.faiss"
    data = bytearray(ann.read_bytes())
    m = read_manifest(ix)
    off = _levels_offset(data)
    off += 8 + 4 * m.n_tokens                                   # the levels
    off += 8 + 8 * (m.n_tokens + 1)                             # the offsets
    struct.pack_into("<i", data, off + 8, m.n_tokens + 5)      # the first link
    ann.write_bytes(bytes(data))
    err = one_line_naming(search(ix, "--any-word"), capsys, "ann.L1.faiss")
    assert "a link out of range" in err


def test_a_faiss_file_of_another_index_is_refused(ix, capsys):
    ann = ix / "ann.L1.faiss"
    data = bytearray(ann.read_bytes())
    struct.pack_into("<q", data, 8, 12345)                      # ntotal
    ann.write_bytes(bytes(data))
    err = one_line_naming(search(ix, "--any-word"), capsys, "ann.L1.faiss")
    assert "holds 12345 vectors" in err


def test_an_index_json_far_bigger_than_a_manifest_is_refused_unparsed(ix, capsys):
    path = ix / "index.json"
    m = json.loads(path.read_text())
    m["reading"]["padding"] = ["x"] * 4_000_000            # 20 MB of valid JSON
    path.write_text(json.dumps(m))
    err = one_line_naming(search(ix), capsys, "index.json")
    assert "larger than 16,777,216 bytes" in err
