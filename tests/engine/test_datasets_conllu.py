"""CoNLL-U reader: real UD EWT data, the format's corner cases, and malformed files."""
from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from elmo_engine.io.datasets import count_conllu, read_conllu
from elmo_engine.errors import InputError

from support import DATA, need

EWT = DATA / "ud_english_ewt"
UPOS = {"ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON",
        "PROPN", "PUNCT", "SCONJ", "SYM", "VERB", "X"}

SAMPLE = """# sent_id = s1
# text = I don't know.
1\tI\tI\tPRON\tPRP\t_\t3\tnsubj\t_\t_
2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_
2\tdo\tdo\tAUX\tVBP\t_\t3\taux\t_\t_
3\tn't\tnot\tPART\tRB\t_\t4\tadvmod\t_\t_
4\tknow\tknow\tVERB\tVB\t_\t0\troot\t_\tSpaceAfter=No
4.1\tknows\t_\t_\t_\t_\t_\t_\t0:root\t_
5\t.\t.\tPUNCT\t.\t_\t4\tpunct\t_\t_

# sent_id = s2
1\tHi\thi\tINTJ\t_\t_\t0\troot\t_\t_
"""


def _ewt(name: str) -> Path:
    return need(EWT / name)


def _write(tmp_path: Path, text: str, name: str = "x.conllu") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_ewt_dev_counts_match_the_file():
    path = _ewt("en_ewt-ud-dev.conllu")
    # count independently: blocks with word lines, and integer-ID lines
    blocks, words, block_has_words = 0, 0, False
    for line in path.read_text("utf-8").splitlines() + [""]:
        if not line.strip():
            blocks += block_has_words
            block_has_words = False
        elif not line.startswith("#"):
            wid = line.split("\t", 1)[0]
            if wid.isdigit():
                words += 1
                block_has_words = True
    assert (blocks, words) == (2001, 25147)  # SOURCES.md
    assert count_conllu(path) == {"sentences": 2001, "words": 25147}


def test_ewt_dev_labels_and_multiword_tokens():
    path = _ewt("en_ewt-ud-dev.conllu")
    sents = list(read_conllu(path, label="upos"))
    assert {lab for s in sents for lab in s.labels} == UPOS
    first = sents[0]
    assert first.tokens == ("From", "the", "AP", "comes", "this", "story", ":")
    assert first.labels == ("ADP", "DET", "PROPN", "VERB", "DET", "NOUN", "PUNCT")
    assert first.meta["sent_id"].endswith("-0001") and first.meta["line"] == 1
    # a multiword token is fed as its syntactic words, never as the surface form
    with_range = [s for s in sents if "n't" in s.tokens]
    assert with_range and all("don't" not in s.tokens for s in with_range)
    xpos = list(read_conllu(path, label="xpos", limit=1))[0]
    assert xpos.labels == ("IN", "DT", "NNP", "VBZ", "DT", "NN", ":")
    assert xpos.meta["upos"] == first.labels
    deprel = list(read_conllu(path, label="deprel", limit=1))[0]
    assert deprel.labels[3] == "root"


def test_ewt_train_gz_streams_with_limit(tmp_path):
    path = _ewt("en_ewt-ud-train.conllu.gz")
    first = list(read_conllu(path, limit=50))
    assert len(first) == 50 and all(len(s) > 0 for s in first)
    # gzip is told by its magic bytes, not by the name
    renamed = tmp_path / "train_without_suffix.conllu"
    shutil.copyfile(path, renamed)
    assert [s.tokens for s in read_conllu(renamed, limit=50)] == [s.tokens for s in first]


def test_sample_ranges_and_empty_nodes(tmp_path):
    path = _write(tmp_path, SAMPLE)
    s1, s2 = read_conllu(path)  # the last sentence has no blank line after it: still read
    assert s1.tokens == ("I", "do", "n't", "know", ".")
    assert s1.labels == ("PRON", "AUX", "PART", "VERB", "PUNCT")
    assert s1.meta["text"] == "I don't know." and s1.meta["sent_id"] == "s1"
    assert s2.tokens == ("Hi",) and s2.meta["line"] == 11
    x1, x2 = read_conllu(path, label="xpos")
    assert x2.labels == (None,)  # "_" is no label
    gz = tmp_path / "x.conllu.gz"
    gz.write_bytes(gzip.compress(SAMPLE.encode()))
    assert [s.tokens for s in read_conllu(gz)] == [s1.tokens, s2.tokens]


def test_crlf_and_bom(tmp_path):
    path = tmp_path / "crlf.conllu"
    path.write_bytes(b"\xef\xbb\xbf" + SAMPLE.replace("\n", "\r\n").encode())
    s1, _ = read_conllu(path)
    assert s1.meta["sent_id"] == "s1" and s1.labels[-1] == "PUNCT"


def _lines():
    return SAMPLE.splitlines()


@pytest.mark.parametrize("lineno,replacement,message", [
    (3, "1\tI\tI\tPRON\tPRP\t_\t3\tnsubj\t_", "10 tab-separated fields"),
    (3, "1\tI\tI\tPRON\tPRP\t_\t3\tnsubj\t_\t_\t_", "10 tab-separated fields"),
    (3, "x\tI\tI\tPRON\tPRP\t_\t3\tnsubj\t_\t_", "bad ID"),
    (3, "2\tI\tI\tPRON\tPRP\t_\t3\tnsubj\t_\t_", "out of sequence"),
    (3, "1\t\tI\tPRON\tPRP\t_\t3\tnsubj\t_\t_", "empty FORM"),
    (4, "2-2\tdon't\t_\t_\t_\t_\t_\t_\t_\t_", "range"),
    (4, "3-4\tdon't\t_\t_\t_\t_\t_\t_\t_\t_", "range"),
    (8, "4.2\tknows\t_\t_\t_\t_\t_\t_\t0:root\t_", "empty node"),
    (5, "# a comment among the words", "comment line inside"),
])
def test_malformed_lines_name_file_and_line(tmp_path, lineno, replacement, message):
    lines = _lines()
    lines[lineno - 1] = replacement
    path = _write(tmp_path, "\n".join(lines) + "\n")
    with pytest.raises(InputError, match=message) as err:
        list(read_conllu(path))
    assert err.value.path == str(path) and err.value.line == lineno
    assert f"{path}:{lineno}:" in str(err.value)


def test_range_past_the_end_of_the_sentence(tmp_path):
    path = _write(tmp_path, "1-2\tgonna\t_\t_\t_\t_\t_\t_\t_\t_\n1\tgon\tgo\tVERB\t_\t_\t0\troot\t_\t_\n")
    with pytest.raises(InputError, match="range ends at word 2") as err:
        list(read_conllu(path))
    assert err.value.line == 1


def test_non_utf8_and_broken_gzip(tmp_path):
    lines = _lines()
    bad = tmp_path / "latin1.conllu"
    bad.write_bytes("\n".join(lines[:4]).encode() + b"\n2\tdo\xe9\tdo\tAUX\tVBP\t_\t3\taux\t_\t_\n")
    with pytest.raises(InputError, match="not valid UTF-8") as err:
        list(read_conllu(bad))
    assert err.value.line == 5 and err.value.path == str(bad)
    data = gzip.compress((SAMPLE * 50).encode())
    truncated = tmp_path / "cut.conllu.gz"
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match="corrupt or truncated") as err:
        list(read_conllu(truncated))
    assert err.value.path == str(truncated) and err.value.line is not None
    garbage = tmp_path / "garbage.conllu.gz"
    garbage.write_bytes(b"\x1f\x8b" + bytes(range(256)) * 4)
    with pytest.raises(InputError, match="corrupt or truncated"):
        list(read_conllu(garbage))


def test_bad_arguments_and_missing_file(tmp_path):
    with pytest.raises(InputError, match="unknown CoNLL-U label"):
        list(read_conllu(tmp_path / "x", label="feats"))
    with pytest.raises(InputError, match="cannot open") as err:
        list(read_conllu(tmp_path / "missing.conllu"))
    assert "missing.conllu" in str(err.value)
    with pytest.raises(InputError, match="folder"):
        list(read_conllu(tmp_path))
    huge = tmp_path / "huge.conllu"
    huge.write_bytes(b"1\t" + b"a" * 3_000_000 + b"\n")
    with pytest.raises(InputError, match="line longer than") as err:
        list(read_conllu(huge))
    assert err.value.line == 1
