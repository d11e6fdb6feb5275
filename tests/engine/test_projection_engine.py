"""Engine side of the projection view: token sets, features, PCA, kNN, UMAP, cache, exports."""
from __future__ import annotations

import csv
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

from elmo_engine.io.datasets.records import LabelledSentence
from elmo_engine.errors import CancelledError, InputError
from elmo_engine.progress import TaskState
from elmo_engine.analysis.projection import (LayerSpec, Projector, TokenSet, UmapParams, all_tokens,
                                             exact_knn, labelled_tokens, layer_features,
                                             load_labelled, parse_word_list, pca, umap_2d, warm_up,
                                             word_tokens, write_coordinates_csv, write_tensorboard)
from elmo_engine.analysis.projection import compute, umapfit

N_LAYERS, DIM = 3, 24


def _corpus(n_sent=40, seed=0):
    """Sentences over a small vocabulary plus fake activations with a layer-0 that is a function
    of the word only (as in ELMo) and context-dependent upper layers."""
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(30)]
    word_vec = {w: rng.normal(size=DIM).astype(np.float32) for w in vocab}
    sents, acts = [], []
    for _ in range(n_sent):
        s = [vocab[k] for k in rng.integers(0, len(vocab), rng.integers(4, 12))]
        a = rng.normal(size=(N_LAYERS, len(s), DIM)).astype(np.float32)
        a[0] = np.stack([word_vec[w] for w in s])
        sents.append(s)
        acts.append(a)
    return sents, acts


@pytest.fixture(scope="module")
def corpus():
    return _corpus()


@pytest.fixture(scope="module")
def shared_fit(corpus):
    """One warm-up and one UMAP fit (~300 points) shared by the UMAP tests (compile is slow)."""
    sents, acts = corpus
    tokens = all_tokens(sents)
    assert 250 <= len(tokens) <= 400
    warm_up()
    proj = Projector()
    params = UmapParams(n_neighbors=10, min_dist=0.1, random_state=7)
    result = proj.umap(acts, tokens, LayerSpec.single(1), params, checksum="m1")
    return tokens, acts, proj, params, result


# ---- token sets -------------------------------------------------------------------------------
def test_all_tokens_and_context():
    ts = all_tokens([["a", "b", "c"], ["d", "e"]])
    assert len(ts) == 5 and ts.words == ("a", "b", "c", "d", "e")
    assert ts.sentence.tolist() == [0, 0, 0, 1, 1] and ts.position.tolist() == [0, 1, 2, 0, 1]
    assert ts.context(1, window=1) == "a [b] c"
    assert ts.context(0, window=1) == "[a] b …"
    assert ts.sentence_text(4) == "d e"
    assert ts.labels is None and ts.label_of(2) == ""


def test_word_tokens_case_and_labels():
    sents = [["The", "bank", "of", "the", "river"], ["A", "Bank", "loan"]]
    ts = word_tokens(sents, parse_word_list("bank, the"))
    assert [(int(s), int(p)) for s, p in zip(ts.sentence, ts.position)] == \
        [(0, 0), (0, 1), (0, 3), (1, 1)]
    assert ts.labels == ("the", "bank", "the", "bank")
    assert len(word_tokens(sents, ["bank"], case_sensitive=True)) == 1
    with pytest.raises(InputError):
        word_tokens(sents, [])
    assert ts.find("BANK").tolist() == [1, 3]


def test_labelled_tokens_targets_only_and_digest():
    data = [LabelledSentence(("I", "saw", "1 000"), (None, "VERB", "NUM")),
            LabelledSentence(("ok",), ("INTJ",))]
    ts = labelled_tokens(data)
    assert ts.words == ("saw", "1_000", "ok") and ts.labels == ("VERB", "NUM", "INTJ")
    every = labelled_tokens(data, targets_only=False)
    assert len(every) == 4 and every.labels[0] is None
    assert ts.digest != labelled_tokens(data[:1]).digest
    relabelled = labelled_tokens([data[0], LabelledSentence(("ok",), ("X",))])
    assert relabelled.digest != ts.digest


def test_sample_is_deterministic_subset(corpus):
    ts = all_tokens(corpus[0])
    a, b = ts.sample(50, seed=3), ts.sample(50, seed=3)
    assert len(a) == 50 and a.digest == b.digest
    assert np.all(np.diff(a.sentence * 1000 + a.position) > 0)    # reading order kept
    assert ts.sample(10_000) is ts


def test_token_set_rejects_bad_positions():
    with pytest.raises(InputError):
        TokenSet([["a"]], [0], [1])
    with pytest.raises(InputError):
        TokenSet([["a"]], [1], [0])


def test_load_labelled_tsv_and_conllu(tmp_path):
    tsv = tmp_path / "d.tsv"
    tsv.write_text("the\t_\nbank\tNOUN\n\nran\tVERB\n", encoding="utf-8")
    ts = labelled_tokens(load_labelled(tsv))
    assert ts.words == ("bank", "ran") and ts.labels == ("NOUN", "VERB")
    conllu = tmp_path / "d.conllu"
    conllu.write_text("# sent_id = 1\n1\tDogs\tdog\tNOUN\tNNS\t_\t2\tnsubj\t_\t_\n"
                      "2\tbark\tbark\tVERB\tVBP\t_\t0\troot\t_\t_\n\n", encoding="utf-8")
    ts = labelled_tokens(load_labelled(conllu))
    assert ts.words == ("Dogs", "bark") and ts.labels == ("NOUN", "VERB")
    xml = tmp_path / "tiny.data.xml"
    xml.write_text('<?xml version="1.0" encoding="UTF-8" ?>\n<corpus lang="en" source="t">\n'
                   '<text id="d000">\n<sentence id="d000.s000">\n'
                   '<wf lemma="the" pos="DET">The</wf>\n'
                   '<instance id="d000.s000.t000" lemma="bank" pos="NOUN">bank</instance>\n'
                   '<instance id="d000.s000.t001" lemma="fail" pos="VERB">failed</instance>\n'
                   '</sentence>\n</text>\n</corpus>\n', encoding="utf-8")
    (tmp_path / "tiny.gold.key.txt").write_text("d000.s000.t000 bank%1:14:00::\n", "utf-8")
    ts = labelled_tokens(load_labelled(xml))
    assert ts.words == ("bank",) and ts.labels == ("bank%1:14:00::",)    # t001 has no gold key
    bad = tmp_path / "bad.tsv"
    bad.write_text("a\tX\nb c d\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"bad\.tsv:2"):
        load_labelled(bad)


# ---- features, PCA, kNN ---------------------------------------------------------------------
def test_layer_features_single_and_mix(corpus):
    sents, acts = corpus
    ts = word_tokens(sents, ["w3", "w7"])
    f1 = layer_features(acts, ts, LayerSpec.single(2))
    assert f1.shape == (len(ts), DIM) and f1.dtype == np.float32
    for i in range(len(ts)):
        np.testing.assert_array_equal(f1[i], acts[ts.sentence[i]][2, ts.position[i]])
    mix = LayerSpec.mix([1.0, 0.0, 3.0])
    assert mix.weights == (0.25, 0.0, 0.75) and mix.key == "mix"
    fm = layer_features(acts, ts, mix)
    i = len(ts) // 2
    a = acts[ts.sentence[i]][:, ts.position[i]]
    np.testing.assert_allclose(fm[i], 0.25 * a[0] + 0.75 * a[2], rtol=1e-5, atol=1e-6)
    with pytest.raises(InputError):
        layer_features(acts, ts, LayerSpec.single(N_LAYERS))
    with pytest.raises(InputError):
        layer_features(acts, ts, LayerSpec.mix([1, 1]))


def test_layer_normalised_mix_is_the_contexts_rule(corpus):
    from elmo_engine.analysis.contexts.compare import compare, gather, layer_stats, mix_layers

    sents, acts = corpus
    # layers of very different scale: without normalisation layer 0 decides the mix
    acts = [a * np.array([40.0, 1.0, 0.5], np.float32)[:, None, None] + 3.0 for a in acts]
    ts = word_tokens(sents, ["w3", "w7"])
    spec = LayerSpec.mix([1.0, 1.0, 2.0], layer_norm=True)
    assert spec != LayerSpec.mix([1.0, 1.0, 2.0]) and spec.key == "mix"
    got = layer_features(acts, ts, spec)
    stats = layer_stats(acts)
    for i in (0, len(ts) // 2, len(ts) - 1):
        a = acts[ts.sentence[i]][:, ts.position[i]].astype(np.float64)           # (L+1, D)
        want = mix_layers((a - stats[:, :1]) / stats[:, 1:], spec.weights)
        np.testing.assert_allclose(got[i], want, rtol=1e-4, atol=1e-4)
    # the same vectors the contexts comparison mixes: equal cosine matrices
    occ = [(int(s), int(p)) for s, p in zip(ts.sentence, ts.position)]
    comp = compare(gather(acts, occ), spec.weights, layer_norm=stats)
    u = got / np.linalg.norm(got, axis=1, keepdims=True)
    np.testing.assert_allclose(u @ u.T, comp.matrices[-1], atol=1e-4)
    plain = layer_features(acts, ts, LayerSpec.mix([1.0, 1.0, 2.0]))
    assert np.abs(plain - got).max() > 1.0
    with pytest.raises(InputError):
        LayerSpec.mix([-1, 2, 0])


@pytest.mark.parametrize("n,d", [(200, 16), (12, 40)])          # covariance path and SVD path
def test_pca_matches_numpy_svd(n, d):
    rng = np.random.default_rng(n)
    x = (rng.normal(size=(n, d)) * np.linspace(5, 0.5, d)).astype(np.float32)
    res = pca(x, 5)
    xc = x.astype(np.float64) - x.mean(0)
    u, s, vt = np.linalg.svd(xc, full_matrices=False)
    ref = u[:, :5] * s[:5]
    assert res.coords.shape == (n, 5) and res.components.shape == (5, d)
    for k in range(5):
        sign = np.sign(np.dot(res.coords[:, k], ref[:, k]))
        np.testing.assert_allclose(res.coords[:, k], sign * ref[:, k], rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(res.explained, s[:5] ** 2 / np.sum(s ** 2), rtol=1e-4)
    np.testing.assert_allclose(res.coords.mean(0), 0.0, atol=1e-4)


def test_pca_sign_convention_and_degenerate_inputs():
    rng = np.random.default_rng(3)
    x = (rng.normal(size=(300, 24)) * np.linspace(4, 0.5, 24)).astype(np.float32)
    res = pca(x, 4)
    big = np.argmax(np.abs(res.components), axis=1)           # largest loading positive
    assert (res.components[np.arange(4), big] > 0).all()
    np.testing.assert_array_equal(pca(x, 4).coords, res.coords)           # deterministic
    same = pca(np.ones((10, 16), np.float32), 2)                # no variance at all
    assert not same.coords.any() and not same.components.any() and not same.explained.any()
    rank2 = pca(np.repeat(rng.normal(size=(3, 40)).astype(np.float32), 4, axis=0), 6)
    assert rank2.explained[2:].tolist() == [0.0] * 4 and not rank2.components[2:].any()
    assert not rank2.coords[:, 2:].any() and rank2.explained[:2].sum() == pytest.approx(1.0)


def test_exact_knn_matches_brute_force():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(300, 12)).astype(np.float32)
    old = compute.KNN_BLOCK
    compute.KNN_BLOCK = 64                           # several blocks
    try:
        idx, dist = exact_knn(x, 6)
    finally:
        compute.KNN_BLOCK = old
    xn = x / np.linalg.norm(x, axis=1, keepdims=True)
    d = 1 - xn @ xn.T
    np.fill_diagonal(d, -1)
    ref = np.argsort(d, axis=1)[:, :6]
    assert idx.dtype == np.int32 and dist.dtype == np.float32
    np.testing.assert_array_equal(idx[:, 0], np.arange(300))
    np.testing.assert_array_equal(np.sort(idx, 1), np.sort(ref, 1))
    np.testing.assert_allclose(dist[:, 1:], np.take_along_axis(d, ref, 1)[:, 1:], atol=1e-5)
    assert np.all(np.diff(dist, axis=1) >= 0)


# ---- UMAP, cache, cancel --------------------------------------------------------------------
@pytest.mark.slow
def test_umap_same_seed_same_picture(shared_fit):
    tokens, acts, _, params, result = shared_fit
    assert result.coords.shape == (len(tokens), 2) and result.method == "umap"
    assert np.all(np.isfinite(result.coords)) and result.coords.std(0).min() > 0.1
    again = Projector().umap(acts, tokens, LayerSpec.single(1), params, checksum="m1")
    assert again is not result
    np.testing.assert_array_equal(again.coords, result.coords)
    other = Projector().umap(acts, tokens, LayerSpec.single(1),
                             UmapParams(n_neighbors=10, min_dist=0.1, random_state=8), "m1")
    assert not np.array_equal(other.coords, result.coords)


@pytest.mark.slow
def test_cache_hit_returns_same_object(shared_fit, monkeypatch):
    tokens, acts, proj, params, result = shared_fit

    def boom(*a, **k):
        raise AssertionError("recomputed despite a cached result")

    monkeypatch.setattr(umapfit, "umap_2d", boom)
    hits = proj.stats["hits"]
    assert proj.umap(acts, tokens, LayerSpec.single(1), params, checksum="m1") is result
    assert proj.stats["hits"] == hits + 1
    assert proj.cached(tokens, LayerSpec.single(1), "umap", params, "m1") is result
    assert proj.cached(tokens, LayerSpec.single(1), "umap", params, "other-model") is None
    with pytest.raises(AssertionError, match="recomputed"):
        proj.umap(acts, tokens, LayerSpec.single(1), UmapParams(n_neighbors=11), checksum="m1")


@pytest.mark.slow
def test_duplicates_share_coordinates(shared_fit):
    tokens, acts, *_ = shared_fit
    coords = umap_2d(layer_features(acts, tokens, LayerSpec.single(0)),
                     UmapParams(n_neighbors=5, random_state=0))
    for w in ("w1", "w2"):
        where = tokens.find(w)
        assert len(where) > 1
        np.testing.assert_array_equal(coords[where], np.repeat(coords[where[:1]], len(where), 0))


def test_umap_needs_enough_points():
    x = np.repeat(np.eye(4, dtype=np.float32), 5, axis=0)     # 20 rows, 4 distinct
    with pytest.raises(InputError, match="distinct"):
        umap_2d(x, UmapParams())


def test_run_pca_progress_and_cancel(corpus):
    sents, acts = corpus
    ts = all_tokens(sents)
    layers = [LayerSpec.single(k) for k in range(N_LAYERS)] + [LayerSpec.mix([1, 1, 1])]
    seen = []
    state = TaskState(lambda d, t, m: seen.append((d, t)))
    out = Projector().run(acts, ts, layers, "pca", state=state)
    assert [p.layer for p in out] == layers and all(p.coords.shape == (len(ts), 2) for p in out)
    assert seen[0] == (0, 4) and seen[-1] == (4, 4)
    assert 0 < sum(out[1].explained) <= 1

    proj = Projector()
    state = TaskState()
    state._on_progress = lambda d, t, m: state.cancel() if d == 1 else None
    with pytest.raises(CancelledError):
        proj.run(acts, ts, layers, "pca", state=state)
    assert proj.cached(ts, layers[0], "pca") is not None
    assert proj.cached(ts, layers[1], "pca") is None
    with pytest.raises(InputError):
        proj.run(acts, ts, layers, "tsne")


# ---- exports -----------------------------------------------------------------------------------
def test_csv_export_parses_back(corpus, tmp_path):
    sents, acts = corpus
    ts = word_tokens(sents, ["w1", "w2", "w3"])
    projs = Projector().run(acts, ts, [LayerSpec.single(0), LayerSpec.single(2)], "pca")
    path = write_coordinates_csv(tmp_path / "out" / "coords.csv", ts, projs)
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == len(ts)
    assert list(rows[0])[:5] == ["index", "token", "sentence", "position", "label"]
    for i in (0, len(ts) - 1):
        assert rows[i]["token"] == ts.words[i] and rows[i]["label"] == ts.labels[i]
        assert int(rows[i]["sentence"]) == ts.sentence[i]
        assert rows[i]["sentence_text"] == " ".join(sents[ts.sentence[i]])
        assert float(rows[i]["layer2_pca_y"]) == pytest.approx(float(projs[1].coords[i, 1]),
                                                                rel=1e-5, abs=1e-5)
    assert [p.name for p in tmp_path.joinpath("out").iterdir()] == ["coords.csv"]


def test_tensorboard_export_parses_back(corpus, tmp_path):
    sents, acts = corpus
    ts = word_tokens(sents, ["w4", "w5"])
    vec = layer_features(acts, ts, LayerSpec.single(1))
    vp, mp = write_tensorboard(tmp_path, vec, ts, prefix="layer1_")
    back = np.loadtxt(vp, delimiter="\t", dtype=np.float32)
    assert back.shape == vec.shape
    np.testing.assert_allclose(back, vec, rtol=1e-5, atol=1e-6)
    lines = mp.read_text(encoding="utf-8").splitlines()
    assert lines[0].split("\t") == ["token", "label", "sentence", "position", "context"]
    assert len(lines) == len(ts) + 1
    assert lines[1].split("\t")[:2] == [ts.words[0], ts.labels[0]]
    _, mp1 = write_tensorboard(tmp_path / "one", vec, ts, columns=["token"])
    assert mp1.read_text(encoding="utf-8").splitlines() == list(ts.words)   # no header row
    with pytest.raises(InputError):
        write_tensorboard(tmp_path, vec[:3], ts)


def test_engine_projection_does_not_import_qt():
    code = textwrap.dedent("""
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split('.')[0] in ('PySide6', 'pyqtgraph', 'superqt', 'PyQt5', 'PyQt6'):
                    raise ImportError('Qt is blocked: ' + name)
        sys.meta_path.insert(0, Block())
        import elmo_engine.analysis.projection
        print('ok')
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


@pytest.mark.slow
def test_umap_cancel_between_epochs_and_progress(shared_fit):
    import numba

    tokens, acts, *_ = shared_fit
    x = layer_features(acts, tokens, LayerSpec.single(2))
    seen = []
    state = TaskState()

    def progress(done, total, message):
        seen.append((done, total, message))
        if message.startswith("UMAP epoch") and done >= 20:
            state.cancel()

    state._on_progress = progress
    threads = numba.get_num_threads()
    with pytest.raises(CancelledError):
        umap_2d(x, UmapParams(n_neighbors=10, n_epochs=3000, random_state=1), state)
    epochs = [d for d, t, m in seen if m.startswith("UMAP epoch")]
    assert epochs and max(epochs) < 3000
    assert all(t == 3000 for d, t, m in seen if m.startswith("UMAP"))
    assert numba.get_num_threads() == threads
    from tqdm.auto import tqdm                 # the bar's lock is free for other threads again
    free = []

    def try_lock():
        lock = tqdm.get_lock()
        got = all(lk.acquire(timeout=5) for lk in lock.locks)
        free.append(got)
        if got:
            lock.release()

    t = threading.Thread(target=try_lock)
    t.start()
    t.join()
    assert free == [True]
    short = umap_2d(x, UmapParams(n_neighbors=10, n_epochs=30, random_state=1))
    assert short.shape == (len(tokens), 2) and np.all(np.isfinite(short))
    with pytest.raises(InputError):
        UmapParams(n_epochs=5)


@pytest.mark.slow
def test_warm_up_is_paid_once_per_process(shared_fit):
    from elmo_engine.analysis.projection import is_warm

    assert is_warm()
    cancelled = TaskState()
    cancelled.cancel()
    assert warm_up() == 0.0 and warm_up(state=cancelled) == 0.0      # nothing left to do


def test_run_falls_back_to_pca_when_too_few_distinct(corpus):
    sents, acts = corpus
    ts = word_tokens(sents, ["w1", "w2"])                 # layer 0: two distinct vectors
    with pytest.raises(InputError, match="distinct"):
        Projector().run(acts, ts, [LayerSpec.single(0)], "umap")
    out = Projector().run(acts, ts, [LayerSpec.single(0)], "umap", pca_fallback=True)
    assert out[0].method == "pca" and out[0].coords.shape == (len(ts), 2)


def test_reference_set_of_bank_is_sense_tagged_with_upos():
    """Issue 39, part 4: the bundled reference set for "bank" starts with its SemCor sentences,
    each occurrence named by its sense (river / money, as the demo sentences' groups) and every
    token tagged with UPOS; the fiction and textbook contexts follow, unlabelled."""
    from elmo_engine.analysis.projection.tokens import reference_word_sentences

    ref = reference_word_sentences("bank")
    tagged = [r for r in ref if r.senses]
    senses = [s for r in tagged for s in r.senses.values()]
    assert senses.count("river") >= 10 and senses.count("money") >= 10
    assert all(r.source == "semcor" and r.upos is not None and len(r.upos) == len(r.tokens)
               for r in tagged)
    assert all(r.tokens[i].casefold() == "bank" and r.upos[i] == "NOUN"
               for r in tagged for i in r.senses)
    assert {r.source for r in ref if not r.senses} == {"pd_fiction", "openstax_prose"}
    assert ref.index(tagged[-1]) < len(tagged)                        # the tagged ones first


def test_word_senses_file_errors_name_the_line(tmp_path):
    from elmo_engine.analysis.projection.tokens import read_word_senses

    bad = tmp_path / "senses.tsv"
    bad.write_text("# header\nbank\triver\tbank%1:17:01::\t1\tThe bank\tDET\n", encoding="utf-8")
    with pytest.raises(InputError) as e:
        read_word_senses(bad, "bank")
    assert "senses.tsv:2: 2 tokens, 1 tags" in str(e.value)
