import pytest

from elmo_engine.model.chars import batch_to_ids, token_to_char_ids
from elmo_engine.model.tokenize import tokenize, whitespace_tokenize


def test_char_ids_examples_from_spec():
    assert token_to_char_ids("th")[:5] == (259, 117, 105, 260, 261)
    assert token_to_char_ids("Āt")[:6] == (259, 197, 129, 117, 260, 261)
    assert token_to_char_ids("")[:3] == (259, 260, 261)
    assert token_to_char_ids("<S>") == (259, 257, 260) + (261,) * 47
    assert token_to_char_ids("</S>") == (259, 258, 260) + (261,) * 47
    assert all(len(token_to_char_ids(t)) == 50 for t in ["", "a" * 200, "😀" * 30])


def test_truncation_keeps_48_bytes_even_inside_a_character():
    ids = token_to_char_ids("é" * 30)          # 60 bytes
    assert ids[0] == 259 and ids[49] == 260
    assert ids[1:49] == tuple(b + 1 for b in ("é" * 30).encode()[:48])


def test_lone_surrogates_are_dropped():
    assert token_to_char_ids("a\ud800b")[:4] == (259, 98, 99, 260)


def test_batch_matches_bilm_tf_batcher_shape():
    ids = batch_to_ids([["The", "first", "sentence"], ["Second", "."]])
    assert ids.shape == (2, 5, 50)
    assert (ids[1, 4] == 0).all()                       # padding token row
    assert tuple(ids[1, 3]) == token_to_char_ids("</S>")
    assert tuple(ids[0, 0]) == token_to_char_ids("<S>")


@pytest.mark.parametrize("text,expected", [
    ("I don't think the U.S. will pay $1,000.",
     ["I", "do", "n't", "think", "the", "U.S.", "will", "pay", "$", "1,000", "."]),
    ("John's dog can't swim; it won't.",
     ["John", "'s", "dog", "ca", "n't", "swim", ";", "it", "wo", "n't", "."]),
    ('He said "hi" (quietly)...', ["He", "said", '"', "hi", '"', "(", "quietly", ")", "..."]),
    ("state-of-the-art 3.14 e.g. Mr. Smith", ["state-of-the-art", "3.14", "e.g.", "Mr.", "Smith"]),
    ("café 😀 שָלוֹם e\u0301", ["café", "😀", "שָלוֹם", "e\u0301"]),
    ("tab\tand\x00control\x07", ["tab", "and", "control"]),
    ("", []),
    ("   \n ", []),
])
def test_tokenize(text, expected):
    assert tokenize(text) == expected


def test_whitespace():
    assert whitespace_tokenize(" a  b\tc \n") == ["a", "b", "c"]


def test_tokens_never_contain_whitespace():
    for text in ["a\u00a0b", "x\u2003y", "1 , 2"]:
        assert all(t and not any(c.isspace() for c in t) for t in tokenize(text))
