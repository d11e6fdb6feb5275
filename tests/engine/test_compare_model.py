"""Comparison and nearest neighbours on the shared fixture biLM
(elmo_engine.analysis.contexts.compare/neighbours)."""
from __future__ import annotations

import csv

import numpy as np
import pytest
import torch

from elmo_engine.analysis.contexts import compare as cmp
from elmo_engine.errors import InputError
from elmo_engine.analysis.contexts.neighbour_corpus import (IndexCache, build_index, index_key, read_corpus,
                                                   read_vocabulary)
from elmo_engine.analysis.contexts.neighbours import (NeighbourIndex, WordIndex, highlight_html, top_k,
                                             write_neighbours_csv)

SENTS = [
    "we sat on the bank of the river and watched the water".split(),
    "she paid the money into the bank on monday".split(),
    "the bank of the river was muddy".split(),
    "the bank of the money was closed".split(),
    "he robbed a bank downtown".split(),
]


@pytest.fixture(scope="module")
def embedder(fixtures_dir):
    from elmo_engine.model.checkpoint import load_checkpoint
    from elmo_engine.embed.embedder import Embedder
    torch.set_num_threads(1)
    return Embedder(load_checkpoint(fixtures_dir / "allennlp"), device="cpu")


@pytest.fixture(scope="module")
def acts(embedder):
    return embedder.embed(SENTS)


def test_layer0_all_ones_upper_layers_not(acts):
    occ = cmp.find_occurrences(SENTS, "bank")
    assert len(occ) == 5
    comp = cmp.compare(cmp.gather(acts, occ), None, occurrences=occ)
    np.testing.assert_allclose(comp.matrices[0], np.ones((5, 5)), atol=1e-6)
    assert comp.self_sim[0] == pytest.approx(1.0, abs=1e-6)
    for k in (1, 2, 3):
        np.testing.assert_allclose(np.diag(comp.matrices[k]), 1.0, atol=1e-6)
        assert comp.self_sim[k] < 0.9999
        assert comp.matrices[k].min() < 0.999


def test_layer0_halves_identical(acts):
    for a in acts:
        p = a.shape[2] // 2
        np.testing.assert_array_equal(a[0, :, :p], a[0, :, p:])


def test_forward_half_cannot_see_right_context(acts):
    # sentences 2 and 3 differ only to the right of "bank" (position 1)
    assert SENTS[2][:4] == SENTS[3][:4] and SENTS[2][4] != SENTS[3][4]
    p = acts[2].shape[2] // 2
    a, b = acts[2][:, 1], acts[3][:, 1]                           # (L+1, 2P)
    for layer in range(1, a.shape[0]):
        np.testing.assert_array_equal(a[layer, :p], b[layer, :p])
        assert np.abs(a[layer, p:] - b[layer, p:]).max() > 1e-4
    vec = cmp.gather(acts, [(2, 1), (3, 1)])
    fwd = cmp.compare(vec, None, "forward")
    bwd = cmp.compare(vec, None, "backward")
    np.testing.assert_allclose(fwd.matrices[:, 0, 1], 1.0, atol=1e-6)
    assert (bwd.matrices[1:, 0, 1] < 1 - 1e-5).all()


def test_neighbour_index_matches_brute_force(acts):
    layers = [np.concatenate([a[k] for a in acts]) for k in (1, 2)]       # (N, 2P)
    idx = NeighbourIndex(SENTS, layers)
    assert idx.n_tokens == sum(map(len, SENTS)) and idx.n_layers == 3
    assert idx.place(idx.flat(3, 4)) == (3, 4)
    q = acts[1][:, 6]                                              # "bank" in sentence 1
    p = q.shape[1] // 2
    for layer in (1, 2):
        for direction, sl in (("both", slice(None)), ("forward", slice(0, p)),
                              ("backward", slice(p, None))):
            x = layers[layer - 1][:, sl].astype(np.float64)
            ref = x @ q[layer, sl] / (np.linalg.norm(x, axis=1) * np.linalg.norm(q[layer, sl]))
            np.testing.assert_allclose(idx.scores(layer, q[layer], direction), ref, atol=1e-5)
            got = idx.query(layer, q[layer], k=5, direction=direction, exclude=[(1, 6)])
            # ties (identical left contexts in the forward half) may come in any order
            best = np.sort(np.delete(ref, idx.flat(1, 6)))[::-1][:5]
            flat = [idx.flat(n.sentence, n.token) for n in got]
            assert idx.flat(1, 6) not in flat and len(set(flat)) == 5
            np.testing.assert_allclose(ref[flat], best, atol=1e-5)
            np.testing.assert_allclose([n.score for n in got], best, atol=1e-5)
    with pytest.raises(InputError):
        idx.scores(0, q[0])


def test_the_disk_cache_keeps_its_newest_files_and_touches_nothing_else(embedder, tmp_path):
    """At most ``disk_files`` index files stay, the least recently used (written or read) go
    first; the user's files in the folder, even one named like an index but not a regular
    file, are never removed."""
    import os
    import time

    (tmp_path / "notes.txt").write_text("mine", encoding="utf-8")
    (tmp_path / "neighbours-dir.npz").mkdir()
    cache = IndexCache(tmp_path, disk_files=2)
    keys = []
    for k in range(3):
        keys.append(cache.get_or_build(embedder, SENTS[k:k + 1]).key)
        time.sleep(0.02)                                     # distinct modification times
        if k == 1:                                           # the first is read: used last
            os.utime(cache._file(keys[0]), (time.time() - 100, time.time() - 100))
            assert IndexCache(tmp_path).get(keys[0]) is not None
            time.sleep(0.02)
    kept = {p.name for p in tmp_path.glob("neighbours-*.npz") if p.is_file()}
    assert kept == {cache._file(keys[0]).name, cache._file(keys[2]).name}
    assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "mine"
    assert (tmp_path / "neighbours-dir.npz").is_dir()
    big = IndexCache(tmp_path / "b", disk_bytes=1)           # over the bytes: only the newest
    big.get_or_build(embedder, SENTS[:1])
    newest = big.get_or_build(embedder, SENTS[1:2])
    assert [p.name for p in (tmp_path / "b").glob("neighbours-*.npz")] == \
        [big._file(newest.key).name]


def test_a_cached_index_is_read_by_the_bounded_reader_and_checked(embedder, tmp_path):
    """The npz holds numbers only (strings as UTF-8 bytes); an index of the old format (str
    arrays), one whose arrays disagree, or a lying header is one line, and the cache builds it
    again instead."""
    import zipfile

    idx = build_index(embedder, SENTS, ["river"], key="k")
    path = tmp_path / "neighbours-k.npz"
    idx.save(path)
    with zipfile.ZipFile(path) as zf:
        assert all(zf.open(n).read(10)[:6] == b"\x93NUMPY" for n in zf.namelist())
    back = NeighbourIndex.load(path)
    assert back.tokens == idx.tokens and back.key == "k" and back.words.words == idx.words.words
    np.savez(tmp_path / "old.npz", format=np.array(1), key=np.array("k"),
             flat_tokens=np.array(["a", "b"], dtype=str), lengths=np.array([2]))
    with pytest.raises(InputError, match="only numeric arrays"):
        NeighbourIndex.load(tmp_path / "old.npz")
    arrays = dict(np.load(path, allow_pickle=False))
    arrays["lengths"] = arrays["lengths"] + 1                 # more tokens than stored
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(InputError, match="tokens for sentences of"):
        NeighbourIndex.load(tmp_path / "bad.npz")
    good = dict(np.load(path, allow_pickle=False))
    crafted = {                          # what a review crafted: each loaded, or raised past
        "float offsets": {"token_ends": good["token_ends"].astype(np.float64)},
        "complex format": {"format": np.array(2 + 0j)},
        "8 M empty sentences": {"lengths": np.zeros(8_000_000, np.int64)},
        "overflowing lengths": {"lengths": np.array([1, 2 ** 62, 2 ** 62, 2 ** 62, 2 ** 62])},
        "narrow backward half": {"bwd0": good["bwd0"][:, :3].copy()},
        "float64 word vectors": {"word_unit": good["word_unit"].astype(np.float64)},
        "a mean of another width": {"mean": good["mean"][:, :4].copy()},
    }
    for what, change in crafted.items():
        np.savez_compressed(tmp_path / "crafted.npz", **{**good, **change})
        with pytest.raises(InputError, match="neighbour index"):
            NeighbourIndex.load(tmp_path / "crafted.npz")
    cache = IndexCache(tmp_path)
    key = index_key(embedder.checksum, SENTS, [])
    (tmp_path / "bad.npz").replace(cache._file(key))
    assert cache.get(key) is None and not cache._file(key).exists()     # dropped, not used
    assert cache.get_or_build(embedder, SENTS).tokens == [list(s) for s in SENTS]


def test_top_k_edge_cases():
    idx, vals = top_k(np.array([0.1, 0.9, 0.5, 0.7]), 2)
    assert list(idx) == [1, 3] and list(vals) == [0.9, 0.7]
    idx, _ = top_k(np.array([0.1, 0.9, 0.5]), 10, exclude=[1])
    assert list(idx) == [2, 0]


def test_build_index_cache_and_words(embedder, tmp_path):
    cache = IndexCache(tmp_path)
    vocab = ["receive", "river", "money"]
    first = cache.get_or_build(embedder, SENTS, vocab)
    assert first.key == index_key(embedder.checksum, SENTS, vocab)
    assert cache.get_or_build(embedder, SENTS, vocab) is first
    assert first.nbytes > 0
    small = IndexCache(max_bytes=1)                      # over budget: only the newest stays
    a = small.get_or_build(embedder, SENTS[:2])
    b = small.get_or_build(embedder, SENTS[2:])
    assert small.get(b.key) is b and small.get(a.key) is None
    assert len(list(tmp_path.glob("neighbours-*.npz"))) == 1
    loaded = IndexCache(tmp_path).get(first.key)                 # from disk, a new cache
    assert loaded is not None and loaded.tokens == first.tokens
    np.testing.assert_array_equal(loaded.fwd[1], first.fwd[1])
    flat = np.concatenate(embedder.embed(SENTS), axis=1)                 # (L+1, N, 2P)
    np.testing.assert_allclose(first.mean, flat.mean(axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(loaded.mean, first.mean)
    assert loaded.words.words == first.words.words
    # a misspelled word still gets a token vector; its nearest known words come from the CNN
    q = embedder.token_vectors(["recieve"])[0]
    words = first.words.query(q, k=3, exclude=["recieve"])
    assert len(words) == 3
    types = first.words.words
    ref = first.words.unit @ (q / np.linalg.norm(q))
    assert words[0][0] == types[int(np.argmax(ref))]
    assert words[0][1] == pytest.approx(float(ref.max()), abs=1e-6)
    assert "bank" in types and "receive" in types
    # the same spelling is its own best match (cosine 1) unless excluded
    bank = embedder.token_vectors(["bank"])[0]
    assert first.words.query(bank, k=1)[0] == ("bank", pytest.approx(1.0, abs=1e-6))
    assert first.words.query(bank, k=1, exclude=["bank"])[0][0] != "bank"


def test_build_index_cancel(embedder):
    from elmo_engine.errors import CancelledError
    from elmo_engine.progress import TaskState
    seen = []
    st = TaskState(lambda d, t, m: seen.append((d, t)))
    st.cancel()
    with pytest.raises(CancelledError):
        build_index(embedder, [["fresh", "tokens", "here"]], state=st)
    st2 = TaskState(lambda d, t, m: seen.append((d, t)))
    build_index(embedder, [["fresh", "tokens", "here"]], state=st2)
    assert seen and seen[-1][0] == seen[-1][1]


def test_read_corpus_and_vocabulary(tmp_path):
    f = tmp_path / "ref.txt"
    f.write_text("The bank of the river.\n\nI don't know.\n", encoding="utf-8")
    ref = read_corpus(f)
    assert ref.sentences == [["The", "bank", "of", "the", "river", "."],
                             ["I", "do", "n't", "know", "."]]
    assert ref.blank_note == "skipped 1 blank line (line 2) of ref.txt"
    para = tmp_path / "para.txt"                 # contexts --reference's reading, and the view's
    para.write_text("The bank of the river. It was steep. A well @-@ known bank.\n", "utf-8")
    assert [len(s) for s in read_corpus(para).sentences] == [6, 4, 8]          # cut, tokenized
    assert read_corpus(para, pretokenized=True, split_sentences=False).sentences == [
        "The bank of the river. It was steep. A well @-@ known bank.".split()]
    with pytest.raises(InputError, match="ref.txt:3"):
        read_corpus(f, max_tokens=8)
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine\n\xff\xfe broken\n")
    with pytest.raises(InputError, match="bad.txt:2"):
        read_corpus(bad)
    v = tmp_path / "vocab.txt"
    v.write_text("<S>\n</S>\n<UNK>\nthe\nbank 12\n", encoding="utf-8")
    assert read_vocabulary(v) == ["the", "bank"]


def test_the_vocabulary_of_known_words_is_the_checkpoints_own_else_the_demo_models(
        tiny_checkpoint, tmp_path):
    """The rule the contexts view and ``contexts --neighbours`` share: a ``vocab.txt`` beside
    the checkpoint, else the demo model's."""
    from elmo_engine.analysis.contexts.neighbour_corpus import vocabulary_file
    from elmo_engine.model.checkpoint import load_checkpoint
    from elmo_engine.resources import demo_checkpoint_path

    demo_vocab = demo_checkpoint_path() / "vocab.txt"
    info = load_checkpoint(tiny_checkpoint).info
    assert vocabulary_file(info.options_path) == demo_vocab            # none beside it
    assert vocabulary_file(None) == demo_vocab
    own = tmp_path / "ck"
    own.mkdir()
    for f in tiny_checkpoint.iterdir():
        (own / f.name).write_bytes(f.read_bytes())
    (own / "vocab.txt").write_text("<S>\nriverbank\n", encoding="utf-8")
    assert vocabulary_file(load_checkpoint(own).info.options_path) == own / "vocab.txt"


def test_neighbours_csv_and_html(tmp_path):
    write_neighbours_csv(tmp_path / "n.csv", [["layer 1", 1, "0.912345", "bank", 2, 1, "a, b"]])
    with open(tmp_path / "n.csv", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    assert rows == [["view", "rank", "score", "word", "sentence", "token", "text"],
                    ["layer 1", "1", "0.912345", "bank", "2", "1", "a, b"]]
    assert highlight_html(["a", "<b>", "c"], 1) == "a <b>&lt;b&gt;</b> c"


def test_word_index_rejects_bad_shapes():
    with pytest.raises(InputError):
        WordIndex(["a", "b"], np.zeros((3, 4)))
