"""The corpora of ``units top``, ``units pattern`` and the Units view
(:mod:`elmo_engine.analysis.units.corpus`): sentence files and CoNLL-U, the first words only."""
from __future__ import annotations

import gzip

import pytest

from elmo_engine.analysis.units.corpus import read_units_corpus
from elmo_engine.errors import InputError

CONLLU = ("# sent_id = a\n1\tDogs\tdog\tNOUN\tNNS\t_\t2\tnsubj\t_\t_\n"
          "2\tbark\tbark\tVERB\tVBP\t_\t0\troot\t_\t_\n\n"
          "# sent_id = b\n1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_\n"
          "2\tcat\tcat\tNOUN\tNN\t_\t3\tnsubj\t_\t_\n3\tsleeps\tsleep\tVERB\tVBZ\t_\t0\troot\t_\t_\n\n")


def test_a_sentence_file_is_tokenized_as_typed_text_or_split_when_pretokenized(tmp_path):
    f = tmp_path / "s.txt"
    f.write_text("The bank's rates rose.\n\nRivers don't flow uphill.\n", encoding="utf-8")
    c = read_units_corpus(f, 1000)
    assert c.sentences == [["The", "bank", "'s", "rates", "rose", "."],
                           ["Rivers", "do", "n't", "flow", "uphill", "."]]
    assert c.labels is None and not c.truncated and c.tokens == 12
    assert read_units_corpus(f, 1000, pretokenized=True).sentences[0] == [
        "The", "bank's", "rates", "rose."]
    assert c.describe() == "s.txt (12 words)"
    assert (c.blank, c.blank_shown) == (1, (2,))
    assert c.blank_note() == "skipped 1 blank line (line 2) of s.txt"


def test_blank_lines_are_counted_ten_shown_and_units_top_says_so(tmp_path, tiny_checkpoint,
                                                                 capsys):
    from elmo_engine.cli.main import main

    f = tmp_path / "gaps.txt"
    f.write_text("".join(f"the bank {i} .\n\n" for i in range(30)), encoding="utf-8")
    c = read_units_corpus(f, 1000)
    assert len(c.sentences) == 30 and c.blank == 30
    assert c.blank_shown == tuple(range(2, 21, 2))             # the first ten only
    assert c.blank_note().endswith("(lines 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, …) of gaps.txt")
    assert read_units_corpus(f, 8).blank == 2                  # only among the lines read
    capsys.readouterr()
    assert main(["units", "top", str(f), "--unit", "3", "--show", "2", "--checkpoint",
                 str(tiny_checkpoint), "--device", "cpu"]) == 0
    assert "note: skipped 30 blank lines (lines 2, 4," in capsys.readouterr().err


def test_conllu_brings_its_upos_tags_plain_or_gzip(tmp_path):
    plain = tmp_path / "t.conllu"
    plain.write_text(CONLLU, encoding="utf-8")
    packed = tmp_path / "t.conllu.gz"
    packed.write_bytes(gzip.compress(CONLLU.encode()))
    for f in (plain, packed):
        c = read_units_corpus(f, 1000)
        assert c.sentences == [["Dogs", "bark"], ["The", "cat", "sleeps"]]
        assert c.labels == [["NOUN", "VERB"], ["DET", "NOUN", "VERB"]]


def test_only_the_first_words_are_read_whole_sentences(tmp_path):
    f = tmp_path / "long.txt"
    f.write_text("".join(f"word{i} a b c\n" for i in range(1000)), encoding="utf-8")
    c = read_units_corpus(f, 10)
    assert c.truncated and c.sentences == [["word0", "a", "b", "c"], ["word1", "a", "b", "c"],
                                           ["word2", "a", "b", "c"]]
    assert c.describe() == "long.txt (the first 12 words)"
    conllu = tmp_path / "t.conllu"
    conllu.write_text(CONLLU, encoding="utf-8")
    short = read_units_corpus(conllu, 2)
    assert short.truncated and short.sentences == [["Dogs", "bark"]]


@pytest.mark.parametrize("content,expect", [
    (None, "s.txt"),                                  # missing
    (b"\n\n", "no sentence"),
    (b"caf\xe9 au lait\n", "UTF-8"),
])
def test_a_bad_corpus_is_one_line_naming_the_file(tmp_path, content, expect):
    f = tmp_path / "s.txt"
    if content is not None:
        f.write_bytes(content)
    with pytest.raises(InputError) as e:
        read_units_corpus(f, 100)
    assert expect in str(e.value) and "s.txt" in str(e.value) and "\n" not in str(e.value)


def test_a_malformed_conllu_names_its_line(tmp_path):
    f = tmp_path / "bad.conllu"
    f.write_text("1\tDogs\tdog\n", encoding="utf-8")
    with pytest.raises(InputError) as e:
        read_units_corpus(f, 100)
    assert "bad.conllu" in str(e.value)


def test_conllu_is_bounded_in_bytes_and_in_words_per_sentence(tmp_path, monkeypatch):
    import elmo_engine.io.datasets.sentences as sentences_mod
    import elmo_engine.model.tokenize as tokenize_mod

    long = tmp_path / "long.conllu"
    long.write_text("".join(f"{i}\tw{i}\t_\tX\t_\t_\t0\tdep\t_\t_\n" for i in range(1, 31))
                    + "\n", encoding="utf-8")
    monkeypatch.setattr(tokenize_mod, "MAX_SENTENCE_TOKENS", 20)
    with pytest.raises(InputError) as e:
        read_units_corpus(long, 1000)
    assert "30 words (at most 20)" in str(e.value) and "long.conllu" in str(e.value)
    monkeypatch.setattr(tokenize_mod, "MAX_SENTENCE_TOKENS", 10_000)
    monkeypatch.setattr(sentences_mod, "MAX_FILE_BYTES", 200)
    with pytest.raises(InputError) as e:
        read_units_corpus(long, 1000)
    assert "long.conllu" in str(e.value)


def test_a_grouped_corpus_over_the_byte_bound_gives_its_first_words(tmp_path, monkeypatch):
    """A grouped ``group<TAB>sentence`` file is told from the lines that will be read, not by
    reading it whole: one over ``MAX_FILE_BYTES`` gives its first words as a plain one does
    (it was refused). A line without a TAB among those read is one line naming it; a grouped
    prefix followed by plain lines that are never read is still grouped."""
    import elmo_engine.io.datasets.sentences as sentences_mod

    monkeypatch.setattr(sentences_mod, "MAX_FILE_BYTES", 4096)
    line = "g1\tThe zebra ran near the water .\n"
    big = tmp_path / "big.txt"
    big.write_text(line * 1000, encoding="utf-8")                     # 31 KB > 4 KB
    plain = tmp_path / "plain.txt"
    plain.write_text(line.split("\t")[1] * 1000, encoding="utf-8")
    for f in (big, plain):
        read = read_units_corpus(f, 20)
        assert read.sentences == [["The", "zebra", "ran", "near", "the", "water", "."]] * 3
        assert read.truncated and read.describe() == f"{f.name} (the first 21 words)"
    mixed = tmp_path / "mixed.txt"
    mixed.write_text(line * 2 + "no tab here .\n" + line, encoding="utf-8")
    assert read_units_corpus(mixed, 1000).sentences[0] == ["g1", "The", "zebra", "ran", "near",
                                                           "the", "water", "."]  # not grouped
    assert read_units_corpus(mixed, 1).sentences == [line.split()[1:]]  # 2 lines: grouped
    # the reader looks one sentence past its words, and a line with no sentence after its TAB
    # holds none: the probe counts lines with words, and one more (a review's two cases)
    short = tmp_path / "short.txt"
    short.write_text("a\tx\nb\ty\nc\tz\nplain line here\n", encoding="utf-8")
    read = read_units_corpus(short, 3)                 # the plain line is met: not grouped
    assert read.sentences == [["a", "x"], ["b", "y"]] and read.truncated
    empty = tmp_path / "empty.txt"
    empty.write_text("a\t \nb\tx y\nplain z\n", encoding="utf-8")
    read = read_units_corpus(empty, 2)
    assert read.sentences == [["a"], ["b", "x", "y"]] and read.truncated
    from elmo_engine.io.datasets.text_input import iter_text_input

    with pytest.raises(InputError) as e:                 # grouped, told from a short prefix
        list(iter_text_input(mixed, grouped=True))
    assert str(e.value).startswith(f"{mixed}:3: no TAB, where the lines before it were")
