"""WSD framework reader (XML + keys) and the WordNet 3.0 sense inventory."""
from __future__ import annotations

import gzip
import zipfile
from pathlib import Path

import pytest

from elmo_engine.io.datasets import WordNet, count_wsd, read_keys, read_wsd, supersense
from elmo_engine.io.datasets.wordnet import (
                                             LEXNAMES,
                                             default_wordnet,
                                             default_wordnet_path,
                                             normalize_pos,
                                             parse_sense_key,
                                             )
from elmo_engine.errors import InputError

from support import DATA, WSD_KEYS, WSD_XML, need

SE07 = DATA / "wsd_eval_raganato2017" / "semeval2007" / "semeval2007"
SEMCOR = DATA / "semcor30"
WN_ZIP = DATA / "wordnet30" / "nltk_data" / "corpora" / "wordnet.zip"

SMALL, KEYS = WSD_XML, WSD_KEYS


@pytest.fixture(scope="module")
def wordnet() -> WordNet:
    need(WN_ZIP)
    # the process-wide cached default (loaded once for all test files) when it is this zip
    if default_wordnet_path() == WN_ZIP:
        return default_wordnet()
    return WordNet(WN_ZIP)


def _write(tmp_path, text, name="x.data.xml"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# --- real data -----------------------------------------------------------------------------

def test_semeval2007_instances_and_keys(wordnet):
    xml = need(Path(f"{SE07}.data.xml"))
    keys = Path(f"{SE07}.gold.key.txt")
    gold = read_keys(keys)
    assert len(gold) == 455 and gold["d000.s000.t000"] == ("refer%2:32:01::",)
    sents = list(read_wsd(xml, keys, wordnet=wordnet))
    insts = [i for s in sents for i in s.instances]
    assert len(sents) == 135 and len(insts) == 455
    assert {i.id for i in insts} == set(gold)
    assert sum(i.pos == "VERB" for i in insts) == 296 and sum(i.pos == "NOUN" for i in insts) == 159
    first = sents[0]
    assert first.tokens[first.instances[0].index] == "referred"
    assert first.instances[0].keys == ("refer%2:32:01::",)
    # every gold key is one of the instance's WordNet candidates (SOURCES: all keys are in WN 3.0)
    assert all(set(i.keys) <= set(i.candidates) for i in insts)
    assert count_wsd(xml, keys) == {"sentences": 135, "tokens": 3219, "instances": 455,
                                    "keyed": 455}


def test_semcor_gz_first_sentences():
    xml = need(SEMCOR / "semcor.data.xml.gz")
    sents = list(read_wsd(xml, limit=300))
    assert len(sents) == 300 and sents[0].id == "d000.s000"
    s0 = sents[0]
    jury = s0.instances[0]
    assert (jury.lemma, jury.pos) == ("group", "NOUN")
    assert s0.tokens[jury.start:jury.stop] == ("Fulton", "County", "Grand", "Jury")
    assert s0.instances[1].index == 5 and s0.tokens[5] == "said"
    assert sum(len(s.instances) for s in sents) > 2000
    assert s0.meta["text_id"] == "d000" and s0.meta["line"] == 4


def test_semcor_keys_gz():
    keys = read_keys(need(SEMCOR / "semcor.gold.key.txt.gz"))
    assert len(keys) == 226005  # SOURCES.md
    assert keys["d000.s000.t000"] == ("group%1:03:00::",)
    assert sum(len(v) > 1 for v in keys.values()) == 656


# --- WordNet --------------------------------------------------------------------------------

def test_wordnet_lookups(wordnet):
    bank_n = wordnet.candidates("bank", "n")
    assert "bank%1:17:01::" in bank_n and len(bank_n) == 10
    assert wordnet.first_sense("bank", "NOUN") == "bank%1:17:01::"  # sloping land
    assert bank_n[1] == "bank%1:14:00::"  # the financial institution is sense 2
    assert len(wordnet.candidates("Bank", "VERB")) == 8
    assert wordnet.sense_number("bank%1:14:00::") == 2
    assert wordnet.synset_offset("bank%1:17:01::") == "09213565"
    assert wordnet.supersense("bank%1:17:01::") == "noun.object"
    assert wordnet.supersense("bank%1:14:00::") == "noun.group"
    assert wordnet.candidates("take place", "v") == ("take_place%2:30:00::",)
    # adjectives include satellites, all numbered together
    ill = wordnet.candidates("ill", "ADJ")
    assert ill[0] == "ill%3:00:01::" and any(k.startswith("ill%5:") for k in ill)
    assert wordnet.candidates("qwertyuiop", "n") == () and wordnet.first_sense("qwerty", "n") is None
    assert len(wordnet) == 206941 and wordnet.lexnames == LEXNAMES
    with pytest.raises(InputError, match="not in WordNet"):
        wordnet.sense_number("bank%1:99:99::")


def test_supersense_and_key_parsing_need_no_files():
    assert supersense("dog%1:05:00::") == "noun.animal"
    assert supersense("run%2:38:00::") == "verb.motion"
    assert supersense("ill%5:00:00:sick:00") == "adj.all"
    assert parse_sense_key("ill%5:00:00:sick:00") == ("ill", "a", 0)
    assert normalize_pos("ADV") == "r" and normalize_pos("s") == "a"
    with pytest.raises(InputError, match="not a WordNet sense key"):
        supersense("bank")
    with pytest.raises(InputError, match="lexicographer file 77"):
        supersense("x%1:77:00::")
    with pytest.raises(InputError, match="unknown part of speech"):
        normalize_pos("DET")


def test_wordnet_folder_and_bad_files(tmp_path):
    folder = tmp_path / "wn"
    folder.mkdir()
    (folder / "index.sense").write_text("bank%1:17:01:: 09213565 1 25\nbank%1:14:00:: 08420278 2 20\n")
    wn = WordNet(folder)
    assert wn.candidates("bank", "n") == ("bank%1:17:01::", "bank%1:14:00::")
    assert wn.supersense("bank%1:14:00::") == "noun.group"  # built-in lexnames
    (folder / "index.sense").write_text("bank%1:17:01:: 09213565 one 25\n")
    with pytest.raises(InputError, match="index.sense") as err:
        WordNet(folder)
    assert err.value.line == 1
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match="wordnet-sense-index"):
        WordNet(empty)
    notzip = tmp_path / "wordnet.zip"
    notzip.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(InputError, match="cannot read WordNet"):
        WordNet(notzip)
    nosense = tmp_path / "nosense.zip"
    with zipfile.ZipFile(nosense, "w") as zf:
        zf.writestr("wordnet/lexnames", "00\tadj.all\t3\n")
    with pytest.raises(InputError, match="no wordnet/index.sense"):
        WordNet(nosense)


# --- small and malformed files ---------------------------------------------------------------

def test_small_file_multiword_and_gzip(tmp_path):
    xml = _write(tmp_path, SMALL)
    keys = _write(tmp_path, KEYS, "x.gold.key.txt")
    (s,) = read_wsd(xml, keys)
    assert s.tokens == ("The", "bank", "took", "place", ".")
    bank, took = s.instances
    assert (bank.start, bank.stop, bank.keys) == (1, 2, ("bank%1:14:00::", "bank%1:14:01::"))
    assert (took.start, took.stop) == (2, 4)
    assert s.to_labelled().labels == (None, "bank%1:14:00::", "take_place%2:30:00::", None, None)
    gz = tmp_path / "x.xml.gz"
    gz.write_bytes(gzip.compress(SMALL.encode()))
    kgz = tmp_path / "k.gz"
    kgz.write_bytes(gzip.compress(KEYS.encode()))
    assert list(read_wsd(gz, kgz)) == [s]
    assert [i.keys for i in next(read_wsd(xml)).instances] == [(), ()]


BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
]>
<corpus><text><sentence id="s"><wf>&lol4;</wf></sentence></text></corpus>
"""
EXTERNAL = """<?xml version="1.0"?>
<!DOCTYPE corpus [<!ENTITY ext SYSTEM "file:///etc/passwd">]>
<corpus><text><sentence id="s"><wf>&ext;</wf></sentence></text></corpus>
"""


@pytest.mark.parametrize("text,message,line", [
    (BILLION_LAUGHS, "DTD or entities", 2),
    (EXTERNAL, "DTD or entities", 2),
    (SMALL[: SMALL.index("<wf lemma=\".\"")], "malformed XML", 8),  # truncated (at line 8)
    (SMALL.replace("</instance>\n<wf", "</wf>\n<wf", 1), "malformed XML", 7),
    (SMALL.replace('id="d000.s000.t001" ', ""), "without id", 7),
    (SMALL.replace('lemma="bank" ', ""), "without lemma", 6),
    (SMALL.replace("d000.s000.t001", "d000.s000.t000"), "appears twice", 7),
    (SMALL.replace("<wf lemma=\"the\" pos=\"DET\">The</wf>", "<p>The</p>"), "unexpected element <p>", 5),
    (SMALL.replace("<text id=\"d000\">", "<text id=\"d000\">stray"), "unexpected text", 4),
    (SMALL.replace(">bank<", "><"), "empty <instance>", 6),
    (SMALL.replace(">The<", ">&nbsp;<"), "malformed XML", 5),
])
def test_malformed_xml_is_refused_with_file_and_line(tmp_path, text, message, line):
    xml = _write(tmp_path, text)
    with pytest.raises(InputError, match=message) as err:
        list(read_wsd(xml))
    assert err.value.path == str(xml) and err.value.line == line


def test_xml_non_utf8_and_corrupt_gzip(tmp_path):
    xml = tmp_path / "latin.xml"
    xml.write_bytes(SMALL.replace("The", "Th\xe9").encode("latin-1"))
    with pytest.raises(InputError, match="malformed XML") as err:
        list(read_wsd(xml))
    assert err.value.line == 5
    gz = tmp_path / "cut.xml.gz"
    data = gzip.compress((SMALL * 3).encode())
    gz.write_bytes(data[:-30])
    with pytest.raises(InputError, match="corrupt or truncated|malformed") as err:
        list(read_wsd(gz))
    assert err.value.path == str(gz)


@pytest.mark.parametrize("text,message,line", [
    ("d000.s000.t000 bank%1:14:00::\nd000.s000.t001\n", "has no sense key", 2),
    ("d000.s000.t000 bank\n", "not a WordNet sense key", 1),
    ("a bank%1:14:00::\n\na bank%1:14:00::\n", "appears twice", 3),
])
def test_malformed_keys(tmp_path, text, message, line):
    keys = _write(tmp_path, text, "k.txt")
    with pytest.raises(InputError, match=message) as err:
        read_keys(keys)
    assert err.value.path == str(keys) and err.value.line == line
