"""Fuzzing every data reader: each corrupted input parses or raises InputError — nothing else.

Short in CI (``ELMO_FUZZ_EXAMPLES``, default 200 per reader, derandomized so runs are repeatable);
run longer by hand, e.g. ``ELMO_FUZZ_EXAMPLES=5000 pytest tests/engine/test_datasets_fuzz.py``.
"""
from __future__ import annotations

import gzip
import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elmo_engine.io.datasets import (WordNet, read_conllu, read_keys, read_sentences, read_tsv,
                                     read_wsd)
from elmo_engine.errors import InputError

from support import WSD_KEYS, WSD_XML

EXAMPLES = int(os.environ.get("ELMO_FUZZ_EXAMPLES", "200"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

CONLLU = ("# sent_id = s1\n# text = I don't know.\n"
          "1\tI\tI\tPRON\tPRP\t_\t3\tnsubj\t_\t_\n"
          "2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_\n"
          "2\tdo\tdo\tAUX\tVBP\t_\t3\taux\t_\t_\n"
          "3\tn't\tnot\tPART\tRB\t_\t4\tadvmod\t_\t_\n"
          "4\tknow\tknow\tVERB\tVB\t_\t0\troot\t_\t_\n"
          "4.1\tknows\t_\t_\t_\t_\t_\t_\t0:root\t_\n"
          "5\t.\t.\tPUNCT\t.\t_\t4\tpunct\t_\t_\n\n"
          "1\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\t_\n\n").encode()
TSV = "# id = a\n# target = 1\nthe\t_\nbank\tNOUN\n\nrun\tVERB\nfast\tADV\n".encode()
SENTENCES = "The bank of the river.\n\nShe plays the bass \u2014 well.\ncaf\u00e9 \u200bbar\n".encode()
# the WSD reader tests' corpus with a second, instance-free sentence
XML = WSD_XML.replace("</text>", '<sentence id="d000.s001"><wf lemma="hi" pos="X">Hi</wf>'
                      "</sentence>\n</text>").encode()
KEYS = WSD_KEYS.encode()
INDEX_SENSE = (b"bank%1:17:01:: 09213565 1 25\nbank%1:14:00:: 08420278 2 20\n"
               b"ill%5:00:00:sick:00 01160031 4 0\n")

# fragments worth splicing in: format tokens, entity tricks, deep nesting, odd bytes
SPLICES = [b"\t", b"\n", b"\r\n", b"\n\n", b"#", b"-", b".", b"_", b"1-3", b"0.1", b"99", b"%",
           b"<", b">", b"&", b"<wf>", b"</instance>", b"<sentence id='x'>", b"<instance>",
           b"<!DOCTYPE c [<!ENTITY a 'aaaaaaaaaa'><!ENTITY b '&a;&a;&a;&a;&a;&a;'>]>", b"&b;",
           b"<!ENTITY x SYSTEM 'file:///etc/passwd'>", b"&x;", b"<sentence>" * 200,
           b"\x00", b"\xff\xfe", b"\xc3", b"\xe2\x80", b"\xef\xbb\xbf", b"\x1f\x8b",
           "\u2028\u202e\u0301".encode(), b"x" * 5000]


@st.composite
def corrupted(draw, seed: bytes) -> bytes:
    """``seed`` after one to three corruptions, possibly gzip-compressed (and then maybe cut)."""
    data = bytearray(seed)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["truncate", "flip", "insert", "delete", "splice", "dupline"]))
        pos = draw(st.integers(0, len(data)))
        if kind == "truncate":
            del data[pos:]
        elif kind == "flip" and data:
            i = min(pos, len(data) - 1)
            data[i] ^= draw(st.integers(1, 255))
        elif kind == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=20))
        elif kind == "delete":
            del data[pos:pos + draw(st.integers(1, 30))]
        elif kind == "splice":
            data[pos:pos] = draw(st.sampled_from(SPLICES))
        elif kind == "dupline":
            lines = bytes(data).split(b"\n")
            i = draw(st.integers(0, len(lines) - 1))
            lines.insert(i, lines[i] * draw(st.integers(1, 3)))
            data = bytearray(b"\n".join(lines))
    out = bytes(data)
    if draw(st.booleans()) and draw(st.integers(0, 3)) == 0:
        out = gzip.compress(out)
        if draw(st.booleans()):
            out = out[: draw(st.integers(0, len(out)))]
    return out


def _check(data: bytes, name: str, read) -> None:
    """``read(path)`` must return normally or raise InputError naming the file."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(data)
        try:
            read(path)
        except InputError as exc:
            assert exc.path is not None and str(path) in exc.path, str(exc)


def test_seeds_are_valid():
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for name, data in (("c.conllu", CONLLU), ("t.tsv", TSV), ("s.txt", SENTENCES),
                           ("x.xml", XML), ("k.txt", KEYS)):
            (tmp / name).write_bytes(data)
        assert len(list(read_conllu(tmp / "c.conllu"))) == 2
        assert len(list(read_tsv(tmp / "t.tsv"))) == 2
        assert len(read_sentences(tmp / "s.txt")) == 3
        assert sum(len(s.instances) for s in read_wsd(tmp / "x.xml", tmp / "k.txt")) == 2
        (tmp / "wn").mkdir()
        (tmp / "wn" / "index.sense").write_bytes(INDEX_SENSE)
        assert len(WordNet(tmp / "wn")) == 3


@FUZZ
@given(corrupted(CONLLU), st.sampled_from(["upos", "xpos", "deprel"]))
def test_fuzz_conllu(data, label):
    _check(data, "f.conllu", lambda p: list(read_conllu(p, label=label)))


@FUZZ
@given(corrupted(TSV))
def test_fuzz_tsv(data):
    _check(data, "f.tsv", lambda p: list(read_tsv(p)))


@FUZZ
@given(corrupted(SENTENCES))
def test_fuzz_sentences(data):
    _check(data, "f.txt", lambda p: read_sentences(p, max_bytes=4096, max_sentence_bytes=2048))


@FUZZ
@given(corrupted(XML))
def test_fuzz_wsd_xml(data):
    _check(data, "f.data.xml", lambda p: list(read_wsd(p)))


@FUZZ
@given(corrupted(KEYS))
def test_fuzz_wsd_keys(data):
    _check(data, "f.key.txt", read_keys)


@FUZZ
@given(corrupted(INDEX_SENSE))
def test_fuzz_wordnet_index_sense(data):
    def read(path: Path) -> None:
        folder = path.parent / "wn"
        folder.mkdir()
        (folder / "index.sense").write_bytes(path.read_bytes())
        try:
            WordNet(folder)
        except InputError as exc:  # re-raise as an error about the fuzzed file
            raise InputError(str(exc), path=path) from None

    _check(data, "index.sense", read)
