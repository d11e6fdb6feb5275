"""token<TAB>label TSV reader/writer and the sentences-file reader."""
from __future__ import annotations

import gzip

import pytest

from elmo_engine.io.datasets import (
                                     LabelledSentence,
                                     clean_sentence,
                                     iter_sentences,
                                     read_sentences,
                                     read_tsv,
                                     write_tsv,
                                     )
from elmo_engine.errors import InputError

TSV = "# id = a1\n# target = 1\nthe\t_\nbank\tNOUN\n\nrun\tVERB\n#\tSYM\nfast\tADV\n"


def test_tsv_sentences_labels_and_comments(tmp_path):
    path = tmp_path / "t.tsv"
    path.write_text(TSV, encoding="utf-8")
    a, b = read_tsv(path)
    assert a.tokens == ("the", "bank") and a.labels == (None, "NOUN")
    assert a.meta["id"] == "a1" and a.meta["target"] == "1" and a.meta["line"] == 1
    assert a.targets() == ((1, "NOUN"),)
    assert b.tokens == ("run", "#", "fast") and b.labels == ("VERB", "SYM", "ADV")
    assert b.meta["line"] == 6
    assert [s.tokens for s in read_tsv(path, limit=1)] == [a.tokens]
    gz = tmp_path / "t.tsv.gz"
    gz.write_bytes(gzip.compress(TSV.encode()))
    assert list(read_tsv(gz)) == [a, b]
    assert [s.labels for s in read_tsv(path, unlabelled="NOUN")][0] == ("_", None)


def test_tsv_round_trip(tmp_path):
    sents = [LabelledSentence(("a", "b"), (None, "X"), {"id": "s1"}),
             LabelledSentence(("c",), ("Y",), {})]
    path = tmp_path / "out" / "w.tsv"
    write_tsv(sents, path, meta_keys=["id"])
    back = list(read_tsv(path))
    assert back == sents and back[0].meta["id"] == "s1"
    with pytest.raises(InputError, match="cannot be written"):
        write_tsv([LabelledSentence(("a\tb",), ("X",))], tmp_path / "bad.tsv")
    assert not (tmp_path / "bad.tsv").exists()


@pytest.mark.parametrize("text,message,line", [
    ("a\tX\nb\n", "2 fields\\), found 1 field", 2),
    ("a\tX\tY\n", "found 3 fields", 1),
    ("a\tX\n\t\tY\n", "found 3 fields", 2),
    ("a\tX\n\tY\n", "empty token", 2),
    ("a\t\n", "empty label", 1),
    ("a\tX\n# late comment\n", "comment line inside", 2),
])
def test_tsv_malformed(tmp_path, text, message, line):
    path = tmp_path / "bad.tsv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=message) as err:
        list(read_tsv(path))
    assert err.value.path == str(path) and err.value.line == line


def test_tsv_non_utf8(tmp_path):
    path = tmp_path / "bad.tsv"
    path.write_bytes(b"a\tX\n\xff\xfe\tY\n")
    with pytest.raises(InputError, match="not valid UTF-8") as err:
        list(read_tsv(path))
    assert err.value.line == 2


def test_sentences_cleaning():
    assert clean_sentence("  The\u200bbank\x07 of\tthe\u2028river  ") == "The bank of the river"
    assert clean_sentence("cafe\u0301") == "caf\u00e9"  # NFC
    assert clean_sentence("\ufeff\u202e\x00 ") == ""


def test_sentences_file(tmp_path):
    path = tmp_path / "s.txt"
    path.write_bytes("\ufeffFirst one.\r\n\r\n   \nSecond\x0b line\u00a0here.\n\u200b\nLast".encode())
    assert list(iter_sentences(path)) == [(1, "First one."), (4, "Second line here."), (6, "Last")]
    assert read_sentences(path, limit=1) == ["First one."]
    gz = tmp_path / "s.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    assert read_sentences(gz) == ["First one.", "Second line here.", "Last"]


def test_two_megabyte_file_is_fine(tmp_path):
    line = "The bank of the river was steep and muddy after the long spring rains.\n"
    n = 2_000_000 // len(line) + 1
    path = tmp_path / "big.txt"
    path.write_text(line * n, encoding="utf-8")
    assert path.stat().st_size > 2_000_000
    sents = read_sentences(path)
    assert len(sents) == n and sents[-1] == line.strip()


def test_sentences_limits_and_errors(tmp_path):
    path = tmp_path / "s.txt"
    path.write_text("one\ntwo\nthree\n", encoding="utf-8")
    with pytest.raises(InputError, match="larger than the limit of 8 bytes") as err:
        read_sentences(path, max_bytes=8)  # "one\ntwo\n" is 8 bytes; line 3 goes past
    assert err.value.line == 3
    long = tmp_path / "long.txt"
    long.write_bytes(b"ok\n" + b"x" * 5000 + b"\n")
    with pytest.raises(InputError, match="line longer than 1000 bytes") as err:
        read_sentences(long, max_sentence_bytes=1000)
    assert err.value.line == 2
    binary = tmp_path / "image.png"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    with pytest.raises(InputError, match="NUL bytes|not valid UTF-8") as err:
        read_sentences(binary)
    assert err.value.path == str(binary)
    nul = tmp_path / "nul.txt"
    nul.write_bytes(b"fine\nnot\x00fine\n")
    with pytest.raises(InputError, match="NUL bytes") as err:
        read_sentences(nul)
    assert err.value.line == 2
    latin = tmp_path / "latin.txt"
    latin.write_bytes(b"ok\ncaf\xe9\n")
    with pytest.raises(InputError, match="not valid UTF-8") as err:
        read_sentences(latin)
    assert err.value.line == 2 and "latin.txt:2:" in str(err.value)
    cut = tmp_path / "cut.gz"
    cut.write_bytes(gzip.compress(b"a sentence\n" * 1000)[:40])
    with pytest.raises(InputError, match="corrupt or truncated"):
        read_sentences(cut)


def test_corpus_text_reads_a_grouped_file_without_its_comments_and_groups():
    """Issue 39: ``train-lm --dev resources/demo_sentences.tsv`` counted the comment lines and
    the group labels ("bank: river") as text; the corpus reader now reads the sentences only."""
    from elmo_engine.io.datasets.corpus_text import read_sentences as read_corpus
    from elmo_engine.io.datasets.sentences import read_grouped_sentences
    from elmo_engine.model.tokenize import tokenize
    from elmo_engine.resources import demo_sentences_path

    path = demo_sentences_path()
    got = read_corpus(path, sentences=False)
    want = [tokenize(s) for _g, s in read_grouped_sentences(path)]
    assert got == want and len(got) == 40
    assert got[0] == ["He", "sat", "on", "the", "bank", "of", "the", "river", "and", "watched",
                      "the", "boats", "."]
    assert not any(t in ("#", "river:") or t.startswith("group") for s in got for t in s[:1])


def test_the_reference_sets_word_contexts_read_as_running_text():
    """Issue 39, part 4: the Corpus view's default index reads the reference set's general
    sentences and its demo-word contexts (``word<TAB>source<TAB>sentence``: the text after the
    last tab), so "bank" occurs there as often as in the Projection view."""
    from elmo_engine.io.datasets.corpus_text import read_sentences as read_corpus
    from elmo_engine.resources import reference_set_files

    general, contexts = reference_set_files()
    assert general.name == "sentences.txt" and contexts.name == "word_contexts.tsv"
    got = read_corpus(contexts, sentences=False)
    assert len(got) == 1635
    assert got[0][:4] == ["The", "dense", "brown", "line"]
    assert not any(s[0] in ("bank", "play", "pd_fiction", "openstax_prose") and s[1] in (
        "pd_fiction", "openstax_prose") for s in got)
    assert sum(t.casefold() == "bank" for s in got for t in s) >= 400
