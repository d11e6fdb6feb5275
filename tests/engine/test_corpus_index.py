"""The corpus index: build, search by example, the model check, resume after SIGKILL, torchrun.

Tiny corpora and the vendored tiny AllenNLP test model (32-wide layers) keep it fast; the search
tests also use the bundled demo model once.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from elmo_engine.errors import InputError

from support import FIXTURES, REPO
from elmo_engine.cli.main import main
from elmo_engine.index.search import CorpusIndex
from elmo_engine.index.store import Reading, read_manifest

TINY = FIXTURES / "allennlp"
CORPUS = REPO / "resources" / "reference_corpus" / "sentences.txt"


def write_corpus(path: Path, n: int, start: int = 0) -> Path:
    lines = CORPUS.read_text("utf-8").splitlines()[start:start + n]
    path.write_text("\n".join(lines) + "\n", "utf-8")
    return path


def build(corpus: Path, out: Path, *extra: str, checkpoint: Path = TINY) -> int:
    return main(["index", str(corpus), "--out", str(out), "--checkpoint", str(checkpoint),
                 "--shard-size", "7", "--device", "cpu", *extra])


def same_answers(a: Path, b: Path) -> bool:
    (ids_a, cos_a), (ids_b, cos_b) = answers(a), answers(b)
    return ids_a == ids_b and np.allclose(cos_a, cos_b, rtol=0, atol=2e-3)


def answers(folder: Path, k: int = 5) -> tuple:
    """Every token's same-word and any-word nearest occurrences, per layer (the index's
    behaviour, compared between builds). Cosines within 2e-3: a process with another number of
    threads computes the vectors to within float32 rounding, which float16 storage can show."""
    ix = CorpusIndex(folder)
    try:
        ids, cos = [], []
        for layer in ix.layers:
            for row in range(ix.manifest.n_tokens):
                for same in (True, False):
                    hits = ix.search_row(row, layer, k, same_word=same)
                    ids.append([(h.sentence_id, h.position, h.word) for h in hits])
                    cos.extend(h.cosine for h in hits)
        return ids, np.array(cos)
    finally:
        ix.close()


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    d = tmp_path_factory.mktemp("index")
    corpus = write_corpus(d / "corpus.txt", 30)
    assert build(corpus, d / "ix", "--layer", "0,1,2") == 0
    return corpus, d / "ix"


def test_layout_and_manifest(small):
    corpus, ix = small
    m = read_manifest(ix)
    assert m.complete and m.layers == (0, 1, 2) and m.dim == 32
    assert m.n_sentences == 30 and m.n_shards == 5
    n = sum(len(line.split()) for line in corpus.read_text("utf-8").splitlines())
    assert abs(m.n_tokens - n) < n // 3                       # regex tokens vs whitespace words
    for layer in m.layers:
        v = np.load(ix / f"vectors.L{layer}.npy", mmap_mode="r", allow_pickle=False)
        assert v.shape == (m.n_tokens, 32) and v.dtype == np.float16
        norms = np.linalg.norm(v.astype(np.float32), axis=1)
        np.testing.assert_allclose(norms, 1.0, atol=2e-3)
    assert not list((ix / "shards").glob("*.npy"))            # removed once complete
    assert main(["index", str(corpus), "--out", str(ix), "--checkpoint", str(TINY),
                 "--shard-size", "7", "--layer", "0,1,2"]) == 0   # complete: nothing to do


@pytest.mark.parametrize("any_word", [False, True])
def test_search_json_returns_the_occurrence_itself_first(small, capsys, any_word):
    corpus, ix = small
    line = corpus.read_text("utf-8").splitlines()[4]
    word = max(line.split()[1:-1], key=len).strip(",.;:")
    capsys.readouterr()
    args = ["search", str(ix), "--sentence", line, "--word", word, "--layer", "2", "-k", "4",
            "--checkpoint", str(TINY), "--json"] + (["--any-word"] if any_word else [])
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    first = out["hits"][0]
    assert set(first) >= {"sentence_id", "position", "word", "cosine", "text"}
    assert first["sentence_id"] == 4 and first["word"] == word
    assert first["text"].split(" ")[first["position"]] == word
    assert first["cosine"] == pytest.approx(1.0, abs=2e-3)        # float16 rounding
    cos = [h["cosine"] for h in out["hits"]]
    assert cos == sorted(cos, reverse=True) and len(cos) <= 4
    if not any_word:
        assert all(h["word"].casefold() == word.casefold() for h in out["hits"])


def test_search_errors_are_one_line(small, capsys):
    corpus, ix = small
    assert main(["search", str(ix), "--sentence", "the bank of the river", "--word", "bank",
                 "--checkpoint", str(TINY), "--layer", "2"]) == 1
    err = capsys.readouterr().err
    assert "'bank' does not occur in the index" in err and "Traceback" not in err
    assert main(["search", str(ix), "--sentence", "a b", "--word", "c",
                 "--checkpoint", str(TINY)]) == 1
    assert "does not occur in the sentence" in capsys.readouterr().err


def test_another_model_is_refused(small, tmp_path, capsys):
    corpus, ix = small
    # the bundled demo model is another checkpoint: the index refuses it, for search and build
    assert main(["search", str(ix), "--sentence", "a b", "--word", "a", "--checkpoint",
                 str(REPO / "resources" / "demo_model")]) == 1
    assert "another model" in capsys.readouterr().err
    out = tmp_path / "ix"
    assert build(corpus, out, "--layer", "1") == 0
    assert build(corpus, out, "--layer", "1",
                 checkpoint=REPO / "resources" / "demo_model") == 1
    assert "was built with another model" in capsys.readouterr().err


@pytest.mark.parametrize("n_layers", [1, 3])
def test_the_default_layers_are_every_bilstm_layer_of_the_model(tmp_path, capsys, n_layers):
    """``--layer`` defaulted to 1,2: a 1-layer model's index failed ("this model has layers
    0–1, got '1,2'", an option the user never typed), and a 3-layer model's top layer was left
    out (search's default is the top layer indexed)."""
    from support import write_tiny_checkpoint

    from elmo_engine.cli.index import parse_layers

    assert parse_layers(None, 3) == (1, 2) and parse_layers(None, 1) == (0,)
    assert parse_layers("0,2", 3) == (0, 2)
    with pytest.raises(InputError, match="this model has layers 0–1, got '1,2'"):
        parse_layers("1,2", 2)
    ck = write_tiny_checkpoint(tmp_path / "ck", n_layers=n_layers)
    corpus = write_corpus(tmp_path / "c.txt", 6)
    assert build(corpus, tmp_path / "ix", checkpoint=ck) == 0, capsys.readouterr().err
    assert read_manifest(tmp_path / "ix").layers == tuple(range(1, n_layers + 1))
    ix = CorpusIndex(tmp_path / "ix")
    try:
        assert ix.layer(None) == n_layers                       # search's default: the top
    finally:
        ix.close()


def test_a_rerun_without_layer_resumes_the_layers_the_build_began_with(tmp_path, capsys):
    """A 3-layer model's build begun with the old default (1,2) and stopped: a rerun without
    ``--layer`` was refused ("another corpus or settings (layers)"), as the default is now
    1,2,3; it resumes the build with the layers it holds. ``--force`` starts over with the
    default; another model's index is still refused."""
    from support import write_tiny_checkpoint

    from elmo_engine.index.build import new_manifest, prepare
    from elmo_engine.index.corpus import CorpusReader, count_corpus
    from elmo_engine.model.checkpoint import load_checkpoint

    ck = write_tiny_checkpoint(tmp_path / "ck", n_layers=3)
    corpus = write_corpus(tmp_path / "c.txt", 9)
    out = tmp_path / "ix"
    reader = CorpusReader.of([corpus], False, True)
    begun = new_manifest(load_checkpoint(ck), str(ck), count_corpus(reader, 7), (1, 2),
                         [corpus], reader.reading())
    prepare(out, begun)                                   # begun, no shard written: stopped
    assert build(corpus, out, checkpoint=ck) == 0, capsys.readouterr().err
    assert "layers 1,2" in capsys.readouterr().err
    m = read_manifest(out)
    assert m.complete and m.layers == (1, 2)
    assert build(corpus, out, "--force", checkpoint=ck) == 0
    assert read_manifest(out).layers == (1, 2, 3)
    assert build(corpus, out, checkpoint=TINY) == 1
    assert "was built with another model" in capsys.readouterr().err


def test_demo_model_finds_itself(tmp_path, capsys):
    corpus = write_corpus(tmp_path / "c.txt", 12, start=100)
    assert main(["index", str(corpus), "--out", str(tmp_path / "ix"), "--shard-size", "5"]) == 0
    line = corpus.read_text("utf-8").splitlines()[7]
    word = max(line.split()[1:-1], key=len).strip(",.;:")
    capsys.readouterr()
    assert main(["search", str(tmp_path / "ix"), "--sentence", line, "--word", word,
                 "--json", "--any-word"]) == 0
    first = json.loads(capsys.readouterr().out)["hits"][0]
    assert (first["sentence_id"], first["word"]) == (7, word)
    assert first["cosine"] == pytest.approx(1.0, abs=2e-3)


def _cli(*args: str) -> list:
    return [sys.executable, "-m", "elmo_engine.cli", *args]


def _env() -> dict:
    return dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))


@pytest.mark.slow
def test_sigkill_at_three_moments_then_resume_gives_the_same_index(small, tmp_path):
    corpus, reference = small
    out = tmp_path / "ix"
    cmd = _cli("index", str(corpus), "--out", str(out), "--checkpoint", str(TINY),
               "--shard-size", "7", "--layer", "0,1,2", "--device", "cpu")
    shards = out / "shards"
    # kill once one shard is whole, once a shard's vectors are there without its JSON (the
    # moment inside a shard, made by hand since it is too short to hit), once joining started
    for moment in ("one shard", "mid-shard", "joining"):
        proc = subprocess.Popen(cmd, cwd=REPO, env=_env(), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            done = len(list(shards.glob("*.json"))) if shards.is_dir() else 0
            if (moment != "joining" and done >= 1 + (moment == "mid-shard")) or (
                    moment == "joining" and (out / "vectors.L0.npy").exists()):
                break
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if moment == "mid-shard":                                # vectors written, JSON not yet
            for f in sorted(shards.glob("*.L0.npy"))[:1]:
                pending = shards / f"s{len(list(shards.glob('*.json'))):06d}.L0.npy"
                pending.write_bytes(f.read_bytes())
            (shards / ".s000009.json.abc.json.part").write_text("{half")
    assert subprocess.run(cmd, cwd=REPO, env=_env(), capture_output=True).returncode == 0
    assert read_manifest(out).complete
    assert not list(shards.glob(".*.part"))
    assert same_answers(out, reference)


@pytest.mark.slow
def test_torchrun_two_processes_merged_answer_as_one(small, tmp_path):
    corpus, reference = small
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
           "--nproc-per-node", "2", "-m", "elmo_engine.cli", "index", str(corpus), "--out",
           str(tmp_path / "two"), "--checkpoint", str(TINY), "--shard-size", "7",
           "--layer", "0,1,2", "--device", "cpu"]
    proc = subprocess.run(cmd, cwd=REPO, env=_env(), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert read_manifest(tmp_path / "two").complete
    assert same_answers(tmp_path / "two", reference)


def test_merge_joins_the_parts_of_separate_nodes(small, tmp_path, monkeypatch):
    """Two "nodes" without a shared folder: each writes its ranks' shards; --merge joins."""
    corpus, reference = small
    import elmo_engine.index.dist as dist

    for rank in (0, 1):
        monkeypatch.setattr(dist, "setup", lambda r=rank: dist.Ranks(r, 2, 0))
        monkeypatch.setattr(dist, "barrier", lambda ranks: None)
        monkeypatch.setattr(dist, "all_ok", lambda ranks, ok: ok)
        assert build(corpus, tmp_path / f"node{rank}", "--layer", "0,1,2") == 0
    assert not read_manifest(tmp_path / "node0").complete           # node 1's shards missing
    assert main(["index", "--merge", str(tmp_path / "node0"), str(tmp_path / "node1"),
                 "--out", str(tmp_path / "merged")]) == 0
    assert same_answers(tmp_path / "merged", reference)


def test_engine_build_cancel_then_resume(small, tmp_path):
    """The app's path: build_index with a TaskState; a cancel stops between shards with the
    complete ones kept, and the next call resumes to the same index."""
    from elmo_engine.embed.embedder import Embedder
    from elmo_engine.errors import CancelledError
    from elmo_engine.index.build import build_index, new_manifest
    from elmo_engine.index.store import shard_done
    from elmo_engine.model.checkpoint import load_checkpoint
    from elmo_engine.progress import TaskState
    from elmo_engine.io.datasets.corpus_text import read_sentences

    corpus, reference = small
    model = load_checkpoint(TINY)
    from elmo_engine.index.corpus import count_corpus

    sents = read_sentences(corpus)
    manifest = new_manifest(model, str(TINY), count_corpus(sents, 7), (0, 1, 2), [corpus],
                            read_manifest(reference).reading)
    assert manifest.identity() == read_manifest(reference).identity()
    emb = Embedder(model, device="cpu", cache_size=0)
    seen = []
    state = TaskState(lambda done, total, msg: seen.append((done, total, msg)))
    state_cancel = TaskState(lambda done, total, msg: done > 0 and state_cancel.cancel())
    with pytest.raises(CancelledError):
        build_index(tmp_path / "ix", sents, manifest, emb, state=state_cancel)
    done = [k for k in range(manifest.n_shards) if shard_done(tmp_path / "ix", k)]
    assert done == [0]
    build_index(tmp_path / "ix", sents, manifest, emb, state=state)
    assert seen[0][0] > 0 and "resuming" in seen[0][2]             # shard 0 was not redone
    assert any("tokens/s" in m for _, _, m in seen)
    assert same_answers(tmp_path / "ix", reference)


def test_rows_of_keeps_recent_words_within_its_bound(small, monkeypatch):
    import elmo_engine.index.search as search

    ix = CorpusIndex(small[1])
    try:
        words = [w for (w,) in ix.db.execute(
            "SELECT folded FROM tokens GROUP BY folded ORDER BY COUNT(*) DESC LIMIT 3")]
        sizes = [len(ix.rows_of(w)) for w in words]
        ix._rows.clear()
        monkeypatch.setattr(search, "ROWS_CACHE", sizes[0] + sizes[1])
        first = ix.rows_of(words[0])
        assert ix.rows_of(words[0]) is first                        # kept
        ix.rows_of(words[1])
        ix.rows_of(words[2])                                        # over the bound: oldest out
        assert words[0] not in ix._rows and words[2] in ix._rows
        assert sum(len(r) for r in ix._rows.values()) <= sizes[0] + sizes[1]
        np.testing.assert_array_equal(ix.rows_of(words[0]), first)  # read again, same rows
        assert not first.flags.writeable
    finally:
        ix.close()


CLOSE_UNDER_A_QUERY = """
import sys, threading, time
import numpy as np
from elmo_engine.errors import CancelledError
from elmo_engine.index.search import CorpusIndex

for trial in range(6):
    ix = CorpusIndex(sys.argv[1])
    rows = np.arange(ix.manifest.n_tokens)
    words = sorted(set(w for *_, w, _ in ix.tokens_at(rows)))
    ended, started = [], threading.Event()

    def reader():
        try:
            for i in range(100_000):
                started.set()
                ix.tokens_at(rows)
                ix.folded_between(0, len(rows) - 1)
                ix.rows_of(words[i % len(words)] + "x" * (i % 7))
        except Exception as e:
            ended.append(type(e).__name__)

    t = threading.Thread(target=reader)
    t.start()
    started.wait()
    time.sleep(0.02 * (trial % 3))
    ix.close()                          # as the app's corpus view does, on the GUI thread
    t.join()
    ix.close()                          # a second close: nothing
    after = []
    for q in (lambda: ix.tokens_at([0]), lambda: ix.rows_of("zzz"), lambda: ix.sentence(0)):
        try:
            q()
        except CancelledError:
            after.append("CancelledError")
    assert float(np.abs(np.asarray(ix.vectors[ix.layer(None)][0], np.float32)).sum()) > 0
    print(ended[0] if ended else "finished", *after, flush=True)
"""


def test_closing_an_index_under_a_running_query_stops_it_cleanly(small):
    """The app closes an index (another one opened, another model) while a job on the other lane
    may be inside a query on it: the query ends in CancelledError, never in a freed connection
    (a segfault before the fix, most trials) or a "damaged table" message, and so does every
    later query; the vectors stay readable. In a child process: a crash fails the test alone."""
    res = subprocess.run([sys.executable, "-c", CLOSE_UNDER_A_QUERY, str(small[1])],
                         capture_output=True, text=True, timeout=240)
    assert res.returncode == 0, res.stderr[-2000:]
    lines = res.stdout.split("\n")[:-1]
    assert lines == ["CancelledError CancelledError CancelledError CancelledError"] * 6, res.stdout


def test_corpus_reader_streams_the_trainers_sentences(tmp_path):
    """The index reads its corpus as a stream: the same sentences as the trainer's reader, cut
    at the embedder's limit, counted per shard, and each shard handed out alone."""
    from elmo_engine.index.corpus import CorpusReader, count_corpus, shard_blocks
    from elmo_engine.model.tokenize import MAX_SENTENCE_TOKENS
    from elmo_engine.io.datasets.corpus_text import iter_sentences, read_sentences

    f = tmp_path / "c.txt"
    long = " ".join(["word"] * (MAX_SENTENCE_TOKENS + 5)) + "."
    f.write_text("= Title =\nThe bank rose. It fell again.\n\nA river bank.\n" + long + "\n",
                 encoding="utf-8")
    assert list(iter_sentences(f)) == read_sentences(f)
    reader = CorpusReader((f, f))
    sents = list(reader)
    assert sents == list(reader)                                   # read anew, the same
    assert len(sents) == 2 * 5 and [len(s) for s in sents[3:5]] == [MAX_SENTENCE_TOKENS, 6]
    count = count_corpus(reader, 3)
    assert (count.n_sentences, count.n_tokens) == (10, sum(len(s) for s in sents))
    assert count.shard_tokens == tuple(sum(len(s) for s in sents[k:k + 3]) for k in (0, 3, 6, 9))
    got = list(shard_blocks(iter(sents), 3, {1, 3}))
    assert [k for k, _ in got] == [1, 3] and got[0][1] == sents[3:6] and got[1][1] == sents[9:]
    empty = tmp_path / "e.txt"
    empty.write_text("= Only a header =\n\n", encoding="utf-8")
    with pytest.raises(InputError, match="empty"):
        count_corpus(CorpusReader((empty,)), 3)


def test_embed_shards_refuses_a_corpus_that_changed(small, tmp_path):
    from elmo_engine.embed.embedder import Embedder
    from elmo_engine.index.build import embed_shards, new_manifest
    from elmo_engine.index.corpus import count_corpus
    from elmo_engine.model.checkpoint import load_checkpoint
    from elmo_engine.io.datasets.corpus_text import read_sentences

    corpus, reference = small
    model = load_checkpoint(TINY)
    sents = read_sentences(corpus)
    manifest = new_manifest(model, str(TINY), count_corpus(sents, 7), (2,), [corpus], Reading())
    with pytest.raises(InputError, match="did a corpus file change"):
        embed_shards(tmp_path, sents[:-1], manifest, Embedder(model, device="cpu"))


def test_the_time_left_covers_the_graph_build(small, tmp_path, monkeypatch):
    """Issue 39: the build said "00:00:00 left" when the embedding ended and then built the HNSW
    graphs for a minute more; now the graphs' estimate (a small graph timed after the first
    shard) is in the time left, and the graph stage states its own rate and time left."""
    import elmo_engine.index.ann as ann_mod
    from elmo_engine.embed.embedder import Embedder
    from elmo_engine.index.ann import AnnSettings, estimate_graph_seconds
    from elmo_engine.index.build import build_index, new_manifest
    from elmo_engine.index.corpus import count_corpus
    from elmo_engine.io.datasets.corpus_text import read_sentences
    from elmo_engine.model.checkpoint import load_checkpoint
    from elmo_engine.progress import TaskState

    rng = np.random.default_rng(0)
    sample = rng.normal(size=(500, 32)).astype(np.float32)
    sample /= np.linalg.norm(sample, axis=1, keepdims=True)
    assert estimate_graph_seconds(sample, 50_000, AnnSettings()) > 0
    assert estimate_graph_seconds(sample[:10], 50_000, AnnSettings()) == 0.0   # too few rows
    monkeypatch.setattr(ann_mod, "estimate_graph_seconds", lambda s, n, settings: 60.0)
    corpus, _reference = small
    model = load_checkpoint(TINY)
    sents = read_sentences(corpus)
    manifest = new_manifest(model, str(TINY), count_corpus(sents, 7), (1, 2), [corpus], Reading())
    seen = []
    build_index(tmp_path / "ix", sents, manifest, Embedder(model, device="cpu", cache_size=0),
                state=TaskState(lambda done, total, msg: seen.append((done, total, msg))))
    last_embed = [m for _d, _t, m in seen if "tokens/s" in m][-1]
    assert last_embed.endswith("00:02:00 left, the graphs included")     # 2 layers × 60 s
    # the rate counts the embedding's time, not the graph estimate's: a first shard that took
    # at least 0.3 s (one shard here) shows at most its tokens / 0.3 s (it once showed its
    # tokens over the microseconds since the estimate: billions of tokens/s)
    import elmo_engine.index.build as build_mod

    real = build_mod.embedded

    def slow(block, embedder):
        time.sleep(0.3)
        yield from real(block, embedder)

    monkeypatch.setattr(build_mod, "embedded", slow)
    one = new_manifest(model, str(TINY), count_corpus(sents, 10_000), (1,), [corpus], Reading())
    seen.clear()
    build_index(tmp_path / "one", sents, one, Embedder(model, device="cpu", cache_size=0),
                state=TaskState(lambda done, total, msg: seen.append((done, total, msg))))
    shown = [m for _d, _t, m in seen if "tokens/s" in m][-1]
    assert float(shown.split(" tokens/s")[0].replace(",", "")) <= one.n_tokens / 0.3
    graph = [m for _d, _t, m in seen if m.startswith("building the nearest-neighbour graph (")]
    assert graph and "vectors/s" in graph[-1] and "left" in graph[-1]
