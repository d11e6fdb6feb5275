"""Issue 25 ("hardening, round three"): each case of the attack table as a regression test.

Every CLI case ends with status 0 or 1, one line on stderr naming the file or the option, no
traceback, and leaves its inputs as they were. Big inputs are generated here; nothing is timed:
the tokenizer's linearity is checked by counting the regex engine's work structurally (the
pattern has no nested unbounded repetition that can rescan) and by a deterministic count of
characters examined; memory by running commands in a subprocess under ``RLIMIT_AS``.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from elmo_engine.cli.main import main

from conftest import FIXTURES

SOURCE = FIXTURES / "allennlp"
ROOT = Path(__file__).resolve().parents[2]


def cli(argv, capsys):
    """Run the CLI in-process: (status, stderr). One line on stderr, no traceback."""
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert code in (0, 1), (code, err)
    assert "Traceback" not in err, err
    if code:
        lines = [ln for ln in err.strip().splitlines() if not ln.startswith("note:")]
        assert len(lines) == 1, err
    return code, err


def ckpt(tmp_path, name="ck") -> Path:
    d = tmp_path / name
    d.mkdir()
    shutil.copy(SOURCE / "options.json", d / "options.json")
    shutil.copy(SOURCE / "lm_weights.hdf5", d / "lm_weights.hdf5")
    return d


def snapshot(folder: Path) -> dict:
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def workspace(tmp_path, checkpoint: Path, name="w.elmows.json") -> Path:
    from elmo_engine.io.workspace_file import CheckpointRef, WorkspaceData, save_workspace

    data = WorkspaceData(sentences=["the bank of the river", "the bank lends money"],
                         checkpoint=CheckpointRef(path=str(checkpoint)))
    return save_workspace(tmp_path / name, data)


# ---- outputs vs inputs ------------------------------------------------------------------------
def test_report_never_replaces_the_workspace_checkpoint_folder(tmp_path, capsys):
    ck = ckpt(tmp_path)
    (ck / "NOTES.txt").write_text("my notes\n", encoding="utf-8")
    before = snapshot(ck)
    ws = workspace(tmp_path, ck)
    code, err = cli(["export", "report", ws, ck, "--force"], capsys)
    assert code == 1 and str(ck) in err
    assert snapshot(ck) == before


def test_report_never_replaces_a_model_folder_or_the_current_folder(tmp_path, capsys,
                                                                     monkeypatch):
    ck = ckpt(tmp_path)
    other = ckpt(tmp_path, "other")                  # a model the workspace does not name
    before = snapshot(other)
    ws = workspace(tmp_path, ck)
    code, err = cli(["export", "report", ws, other, "--force"], capsys)
    assert code == 1 and "holds" in err and str(other) in err
    assert snapshot(other) == before
    here = tmp_path / "here"
    here.mkdir()
    (here / "keep.txt").write_text("keep\n", encoding="utf-8")
    monkeypatch.chdir(here)
    code, err = cli(["export", "report", ws, ".", "--force"], capsys)
    assert code == 1 and "current folder" in err
    code, err = cli(["export", "report", ws, tmp_path, "--force"], capsys)
    assert code == 1 and ("current folder" in err or "holds an input" in err)
    code, err = cli(["export", "report", ws, "."], capsys)
    assert code == 1 and ("exists" in err or "current folder" in err)
    assert (here / "keep.txt").read_text(encoding="utf-8") == "keep\n"


def test_report_still_replaces_an_old_report(tmp_path, capsys):
    ck = ckpt(tmp_path)
    ws = workspace(tmp_path, ck)
    out = tmp_path / "report"
    for _ in range(2):
        code, err = cli(["export", "report", ws, out, "--force", "--word", "bank"], capsys)
        assert code == 0, err
    assert (out / "report.md").is_file()


def test_train_lm_list_inputs_are_guarded(tmp_path, capsys):
    out = tmp_path / "OUT"
    out.mkdir()
    corpus = out / "vocab.txt"
    corpus.write_text("the cat sat .\n" * 5, encoding="utf-8")
    dev = tmp_path / "dev.txt"
    dev.write_text("the cat sat .\n", encoding="utf-8")
    code, err = cli(["train-lm", corpus, "--dev", dev, "--out", out], capsys)
    assert code == 1 and "holds an input" in err
    code, err = cli(["train-lm", dev, "--dev", corpus, "--out", out, "--force"], capsys)
    assert code == 1 and "holds an input" in err
    assert corpus.read_text(encoding="utf-8") == "the cat sat .\n" * 5


def test_export_vectors_implied_metadata_file_is_guarded(tmp_path, capsys):
    src = tmp_path / "X.metadata.tsv"
    src.write_text("the bank\nthe river bank\n", encoding="utf-8")
    code, err = cli(["export", "vectors", src, tmp_path / "X.tsv", "--force", "--layers", "top",
                     "--checkpoint", SOURCE], capsys)
    assert code == 1 and "is also an input" in err and "X.metadata.tsv" in err
    src2 = tmp_path / "Y.layer1.tsv"
    src2.write_text("the bank\n", encoding="utf-8")
    code, err = cli(["export", "vectors", src2, tmp_path / "Y.tsv", "--force",
                     "--checkpoint", SOURCE], capsys)
    assert code == 1 and "is also an input" in err
    assert src.read_text(encoding="utf-8") == "the bank\nthe river bank\n"


@pytest.mark.parametrize("argv", [
    ["contexts", "--word", "bank", "--json", "{demo}", "--force"],
    ["layers", "--json", "{ref}", "--force"],
    ["probe", "--task", "demo-pos", "--out", "{task}", "--force"],
])
def test_bundled_inputs_are_never_written(capsys, argv):
    from elmo_engine.analysis.layers_run import reference_corpus_path
    from elmo_engine.resources import demo_sentences_path, demo_tasks_dir

    task = sorted((demo_tasks_dir() / "pos").iterdir())[0]
    paths = {"demo": demo_sentences_path(), "ref": reference_corpus_path(), "task": task}
    before = {k: p.read_bytes() for k, p in paths.items()}
    code, err = cli([a.format(**paths) for a in argv], capsys)
    assert code == 1 and "bundled resources" in err
    assert {k: p.read_bytes() for k, p in paths.items()} == before


# ---- text: linear tokenizing and normalising ---------------------------------------------------
CLASSES = ["+", ".", "-", "_", "@", "+@", "a", "a@b.", "www.", "1,", "a-", "\u0301",
           "\u0316\u0301", "e\u0301\u0316", "'", "’s"]


def _unbounded_before_required(pattern) -> list:
    """Walk the parsed token pattern: the top-level alternatives in which an unbounded
    repetition is followed by something required (a failed try there can rescan), and the
    places where an unbounded repetition holds another one."""
    import re._constants as c
    import re._parser as sp

    def unbounded(item):
        op, av = item
        return op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT) and av[1] == c.MAXREPEAT

    def optional(item):
        op, av = item
        return (op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT) and av[0] == 0) or \
            op in (c.ASSERT, c.ASSERT_NOT, c.AT)

    def nested(seq):
        for op, av in seq:
            if op in (c.MAX_REPEAT, c.MIN_REPEAT):
                if av[1] == c.MAXREPEAT and any(unbounded(i) for i in _flat(av[2])):
                    yield av
            for sub in _subs(op, av):
                yield from nested(sub)

    def _subs(op, av):
        if op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
            return [av[2]]
        if op == c.SUBPATTERN:
            return [av[3]]
        if op == c.BRANCH:
            return list(av[1])
        return []

    def _flat(seq):
        for op, av in seq:
            yield (op, av)
            for sub in _subs(op, av):
                yield from _flat(sub)

    parsed = sp.parse(pattern.pattern, pattern.flags)
    (op, av), = list(parsed)
    assert op == c.BRANCH
    risky = []
    for k, branch in enumerate(av[1]):
        items = list(branch)
        for i, item in enumerate(items):
            if unbounded(item) and not all(optional(x) for x in items[i + 1:]):
                risky.append(k)
        if list(nested(items)):
            risky.append(("nested", k))
    return risky


def test_token_pattern_has_no_rescanning_alternative():
    from elmo_engine.model import tokenize as tk

    risky = _unbounded_before_required(tk._TOKEN_RE)
    # alternative 0, the URL: "\S+" then one closing character. It starts only at "http" or
    # "www." and, once it fails, the rest of the piece holds no letter, so no later start
    # exists: at most one failed try per piece. Alternatives 3 (numbers) and 5 (words): the
    # repeated group starts with a separator ([.,:/] or [-'’]) its inner repetition cannot
    # match, so each character is matched one way only.
    assert risky == [0, ("nested", 3), ("nested", 5)]
    assert "@" not in tk._TOKEN_RE.pattern                   # e-mail addresses are found apart
    import re                                                # the walk sees the old risk
    old = re.compile(r"(?:https?://|www\.)\S+[^\s.,;:!?'\")\]]|[\w.+-]+@[\w-]+(?:\.[\w-]+)+|\S")
    assert 1 in _unbounded_before_required(old)              # the e-mail alternative


def test_tokens_of_normal_text_are_unchanged():
    """The published outputs' conformance tests use the tokenizer; this checks the rewrite
    against the old pattern on the shipped sentences and on e-mail-like strings."""
    import random
    import re

    from elmo_engine.model import tokenize as tk
    from elmo_engine.resources import demo_sentences_path

    old = re.compile(tk._URL + r"""
  | [\w.+-]+@[\w-]+(?:\.[\w-]+)+
  | """ + tk._REST, re.VERBOSE)

    def old_tokenize(text):
        text = tk._NT_SPLIT.sub(r"\1 \2", tk._CONTROL.sub(" ", text))
        return [m.group(0) for p in text.split() for m in old.finditer(p)]

    from elmo_engine.analysis.layers_run import reference_corpus_path
    lines = reference_corpus_path().read_text("utf-8").splitlines()[:1500]
    lines += demo_sentences_path().read_text("utf-8").splitlines()
    rng = random.Random(0)
    alphabet = list("ab.+-_@'’ 1,:/%()\"!?`") + ["www.", "http://", "n't", "U.S.", "Mr.", "é",
                                                  "john.doe@example.com", "e\u0301"]
    lines += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 30)))
              for _ in range(4000)]
    for line in lines:
        assert tk.tokenize(line) == old_tokenize(line), line


def test_a_megabyte_of_any_character_class_tokenizes_in_linear_time():
    """1 MB pieces of every class in a subprocess: the old pattern took hours on '+' (quadratic);
    the timeout only guards against a hang, no timing is asserted."""
    code = ("import sys\nfrom elmo_engine.model.tokenize import tokenize\n"
            "from elmo_engine.io.datasets.sentences import clean_sentence\n"
            f"for c in {CLASSES!r}:\n"
            "    s = c * (1_000_000 // len(c))\n"
            "    n = len(tokenize(s))\n"
            "    assert 1 <= n <= len(s), (c, n)\n"
            "    assert tokenize(s, 10_000)[:3] == tokenize(s)[:3]\n"
            "    assert len(tokenize(s, 10_000)) <= 10_000 + len(s)\n"
            "    clean_sentence(s, 10_000)\n"
            "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_nfc_per_piece_is_exact_on_text_and_bounded_on_runs_of_marks():
    import unicodedata

    from elmo_engine.io.datasets.sentences import clean_sentence, nfc_piece

    text = "Cafe\u0301 na\u0131\u0308ve \u212b \u1100\u1161\u11a8 e\u0301" * 3
    assert clean_sentence(text) == " ".join(unicodedata.normalize("NFC", text).split())
    word = "e\u0301" * 200                               # a long piece: segments, same result
    assert nfc_piece(word) == unicodedata.normalize("NFC", word)
    marks = "\u0316\u0301" * 50_000                      # alternating classes: quadratic whole
    out = nfc_piece(marks)
    assert len(out) == len(marks) and sorted(out) == sorted(marks)
    # each run of 30 marks is in canonical order (what NFC gives a stream-safe text)
    assert out[:30] == unicodedata.normalize("NFC", marks[:30])


def test_the_token_limit_comes_before_per_token_work(tmp_path, capsys):
    f = tmp_path / "long.txt"
    f.write_text("+" * 1_000_000 + "\n", encoding="utf-8")
    code, err = cli(["embed", f, tmp_path / "o.hdf5", "--checkpoint", SOURCE], capsys)
    assert code == 1 and "long.txt:1" in err and "10000" in err
    f.write_text("\u0316\u0301" * 400_000 + "\n", encoding="utf-8")
    code, err = cli(["contexts", "--word", "x", "--sentences", f, "--checkpoint", SOURCE], capsys)
    assert code == 1 and "long.txt" in err


# ---- FIFOs and devices -------------------------------------------------------------------------
@pytest.fixture()
def fifo(tmp_path):
    p = tmp_path / "pipe.txt"
    os.mkfifo(p)
    return p


def test_fifos_are_refused_by_every_text_reader(tmp_path, fifo, capsys):
    from elmo_engine.cli.train_lm import main as train_main
    from elmo_engine.io.datasets.wordnet import load_wordnet

    good = tmp_path / "good.txt"
    good.write_text("the bank of the river .\n" * 30, encoding="utf-8")
    cases = [
        ["eval-lm", fifo],
        ["embed", fifo, tmp_path / "o.hdf5"],
        ["export", "vectors", fifo, tmp_path / "o.npz"],
        ["contexts", "--word", "bank", "--sentences", fifo],
        ["layers", fifo],
        ["project", fifo, "--csv", tmp_path / "o.csv"],
        ["probe", "--task", "tsv", "--train", fifo, "--test", good, "--out", tmp_path / "o.json"],
    ]
    for argv in cases:
        code, err = cli(argv, capsys)
        assert code == 1 and "pipe.txt" in err and "FIFO" in err, (argv, err)
    code = train_main([str(fifo), "--dev", str(good), "--out", str(tmp_path / "lm"),
                       "--preset", "tiny"])
    err = capsys.readouterr().err
    assert code == 1 and "pipe.txt" in err and "FIFO" in err
    wn = tmp_path / "wn"
    wn.mkdir()
    os.mkfifo(wn / "index.sense")
    with pytest.raises(Exception) as e:
        load_wordnet(wn)
    assert "FIFO" in str(e.value) and "index.sense" in str(e.value)


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_a_workspace_checkpoint_that_is_a_fifo_or_a_device(tmp_path, capsys):
    from elmo_engine.io.workspace_file import load_workspace

    fifo = tmp_path / "weights.hdf5"
    os.mkfifo(fifo)
    folder = tmp_path / "ck"
    folder.mkdir()
    shutil.copy(SOURCE / "options.json", folder / "options.json")
    os.symlink("/dev/zero", folder / "lm_weights.hdf5")
    for name, ck in (("fifo", fifo), ("zero", Path("/dev/zero")), ("folder", folder)):
        ws = workspace(tmp_path, ck, f"{name}.elmows.json")
        loaded = load_workspace(ws)                      # the checksum is not read from it
        assert loaded.checkpoint_path is not None
        code, err = cli(["export", "report", ws, tmp_path / f"r-{name}"], capsys)
        assert code == 1, err
        assert not (tmp_path / f"r-{name}").exists()


def test_gzip_bomb_stops_at_the_limit(tmp_path, capsys):
    import gzip

    from elmo_engine.io.datasets.sentences import MAX_FILE_BYTES

    bomb = tmp_path / "bomb.txt.gz"
    with gzip.open(bomb, "wb", compresslevel=1) as fh:
        for _ in range(MAX_FILE_BYTES // (22 << 16) + 2):
            fh.write(b"the bank of the river\n" * (1 << 16))  # > 16 MiB from ~100 kB
    assert bomb.stat().st_size < 500_000
    for argv in (["embed", bomb, tmp_path / "o.hdf5"],
                 ["export", "vectors", bomb, tmp_path / "o.npz"]):
        code, err = cli(argv + ["--checkpoint", SOURCE], capsys)
        assert code == 1 and "bomb.txt.gz" in err and "limit" in err
    assert not (tmp_path / "o.hdf5").exists()


# ---- memory ------------------------------------------------------------------------------------
def run_capped(argv, limit_gb: float = 2.5, timeout: int = 240):
    """Run the CLI in a subprocess whose address space is capped (torch alone maps ~1 GB):
    (status, stderr)."""
    code = ("import resource, sys\n"
            f"lim = int({limit_gb} * (1 << 30))\n"
            "resource.setrlimit(resource.RLIMIT_AS, (lim, lim))\n"
            "from elmo_engine.cli.main import main\n"
            f"sys.exit(main({[str(a) for a in argv]!r}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=timeout, cwd=ROOT)
    assert "Traceback" not in out.stderr, out.stderr
    return out.returncode, out.stderr


def _corpus(path: Path, nbytes: int) -> Path:
    from elmo_engine.analysis.layers_run import reference_corpus_path

    lines = reference_corpus_path().read_text("utf-8").splitlines()
    with open(path, "w", encoding="utf-8") as fh:
        n = i = 0
        while n < nbytes:
            fh.write(lines[i % len(lines)] + "\n")
            n += len(lines[i % len(lines)]) + 1
            i += 1
    return path


def test_activations_of_a_big_text_are_capped(tmp_path):
    big = _corpus(tmp_path / "big.txt", 875_000)
    for argv in (["contexts", "--word", "the", "--sentences", big],
                 ["layers", big],
                 ["export", "vectors", big, tmp_path / "v.npz"]):
        code, err = run_capped(argv)
        assert code == 1, err
        line = err.strip().splitlines()[-1]
        assert ("limit" in line or "at most" in line) and "tokens" in line, line


def test_the_layer_cap_is_stated_and_the_plan_checked_before_allocating():
    import numpy as np

    from elmo_engine.analysis import contextuality as cx
    from elmo_engine.errors import InputError

    tokens = [["w%d" % (i % 50) for i in range(40)] for _ in range(3000)]   # 120,000 tokens
    with pytest.raises(InputError, match="MiB"):
        old = cx.MAX_PLAN_BYTES
        try:
            cx.MAX_PLAN_BYTES = 64 << 20
            cx.ContextualityAccumulator(tokens, 3, 1024, min_count=5)
        finally:
            cx.MAX_PLAN_BYTES = old
    assert np.isfinite(cx.MAX_PLAN_BYTES)


def test_wordnet_zip_entry_over_the_limit_is_refused_by_its_declared_size(tmp_path,
                                                                          monkeypatch):
    import zipfile

    from elmo_engine.io.datasets import wordnet

    monkeypatch.setattr(wordnet, "MAX_WORDNET_FILE_BYTES", 1 << 20)
    z = tmp_path / "wordnet.zip"
    with zipfile.ZipFile(z, "w", zipfile.ZIP_DEFLATED) as zf:
        with zf.open("wordnet/index.sense", "w") as fh:
            for _ in range(8):
                fh.write(bytes(1 << 20))                    # 8 MB of zeros, ~8 kB stored
    assert z.stat().st_size < 100_000
    with pytest.raises(Exception) as e:
        wordnet.load_wordnet(z)
    assert "index.sense" in str(e.value) and "bytes" in str(e.value)


def test_a_sparse_2_gib_bilm_json_is_not_read_whole(tmp_path, capsys):
    d = tmp_path / "native"
    d.mkdir()
    with open(d / "bilm.json", "wb") as fh:
        fh.write(b'{"format": ')
        fh.truncate(2 << 30)                              # sparse: no disk used
    (d / "bilm.safetensors").write_bytes(b"\0" * 16)
    code, err = cli(["info", d], capsys)
    assert code == 1 and "bilm.json" in err and "larger than" in err


def test_probe_label_count_is_capped(tmp_path, capsys):
    from elmo_engine.analysis.probes.tasks import MAX_PROBE_LABELS

    tsv = tmp_path / "labels.tsv"
    with open(tsv, "w", encoding="utf-8") as fh:
        for i in range(MAX_PROBE_LABELS + 5):
            fh.write(f"word\tL{i}\n\n")
    code, err = cli(["probe", "--task", "tsv", "--train", tsv, "--test", tsv,
                     "--out", tmp_path / "o.json", "--checkpoint", SOURCE], capsys)
    assert code == 1 and "labels.tsv" in err and f"{MAX_PROBE_LABELS:,} distinct labels" in err
    assert not (tmp_path / "o.json").exists()


# ---- training states ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from lm_train_helpers import write_corpus

    from elmo_engine.cli.train_lm import main as train_main

    root = tmp_path_factory.mktemp("lm")
    corpus = write_corpus(root / "corpus.txt", 60, seed=1)
    dev = write_corpus(root / "dev.txt", 5, seed=2)
    code = train_main([str(corpus), "--dev", str(dev), "--out", str(root / "out"), "--preset",
                       "tiny", "--max-steps", "2", "--no-progress", "--threads", "1"])
    assert code == 0
    return root


def _resume(trained, tmp_path, edit, capsys):
    from elmo_engine.cli.train_lm import main as train_main

    out = tmp_path / "out"
    shutil.copytree(trained / "out", out)
    state = out / "checkpoint" / "state.json"
    doc = json.loads(state.read_text("utf-8"))
    edit(doc)
    state.write_text(json.dumps(doc), encoding="utf-8")
    code = train_main([str(trained / "corpus.txt"), "--dev", str(trained / "dev.txt"), "--out",
                       str(out), "--preset", "tiny", "--max-steps", "4", "--resume",
                       "--no-progress", "--threads", "1"])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


@pytest.mark.parametrize("edit, field", [
    (lambda d: d.pop("history"), "history"),
    (lambda d: d.__setitem__("train_seconds", "soon"), "train_seconds"),
    (lambda d: d.__setitem__("step", -3), "step"),
    (lambda d: d["history"].pop("dev"), "history.dev"),
])
def test_resume_checks_the_state_document(trained, tmp_path, capsys, edit, field):
    code, err = _resume(trained, tmp_path, edit, capsys)
    assert code == 1 and "state.json" in err and field in err


def test_a_state_whose_config_claims_a_huge_model_is_refused_before_building(trained, tmp_path,
                                                                              capsys):
    def huge(doc):
        doc["config"]["options"]["lstm"]["dim"] = 1 << 20          # 2^20-wide LSTMs: ~6 GB

    code, err = _resume(trained, tmp_path, huge, capsys)
    assert code == 1 and "checkpoint" in err
    assert "does not match" in err or "dim" in err


# ---- models ------------------------------------------------------------------------------------
def _edit_options(tmp_path, change) -> Path:
    d = ckpt(tmp_path, "edited")
    opts = json.loads((d / "options.json").read_text("utf-8"))
    change(opts)
    (d / "options.json").write_text(json.dumps(opts), encoding="utf-8")
    return d


@pytest.mark.parametrize("change, words", [
    (lambda o: o["char_cnn"].__setitem__("max_characters_per_token", 2), ">= 3"),
    (lambda o: o["char_cnn"].__setitem__("max_characters_per_token", 1), ">= 3"),
    (lambda o: o["char_cnn"].__setitem__("max_characters_per_token", 4), "wider than the token"),
    (lambda o: o["lstm"].__setitem__("projection_dim", 128), "projection_dim"),
])
def test_options_that_cannot_work_are_refused_at_load(tmp_path, capsys, change, words):
    d = _edit_options(tmp_path, change)
    for argv in (["info", d], ["embed", _text(tmp_path), tmp_path / "o.hdf5", "--checkpoint", d]):
        code, err = cli(argv, capsys)
        assert code == 1 and "options.json" in err and words in err, err


def _text(tmp_path) -> Path:
    t = tmp_path / "s.txt"
    t.write_text("the bank of the river\n", encoding="utf-8")
    return t


@pytest.mark.parametrize("dataset, layer", [
    ("RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_0", "layer 1"),
    ("CNN/W_cnn_4", "layer 0"),
])
def test_finite_weights_that_overflow_are_refused_naming_the_layer(tmp_path, capsys, dataset,
                                                                   layer):
    import h5py
    import numpy as np

    d = ckpt(tmp_path)
    with h5py.File(d / "lm_weights.hdf5", "r+") as fh:
        ds = fh[dataset]
        ds[...] = np.sign(ds[...] + 1e-3).astype(np.float32) * np.float32(3e38)
    text = _text(tmp_path)
    for argv in (["info", d], ["embed", text, tmp_path / "o.hdf5", "--checkpoint", d],
                 ["contexts", "--word", "bank", "--sentences", text, "--checkpoint", d],
                 ["layers", text, "--checkpoint", d, "--json", tmp_path / "l.json"]):
        code, err = cli(argv, capsys)
        assert code == 1 and "not finite" in err and layer in err and "lm_weights.hdf5" in err
    assert not (tmp_path / "o.hdf5").exists() and not (tmp_path / "l.json").exists()


def test_non_finite_vectors_never_reach_an_output():
    import numpy as np

    from elmo_engine.embed.embedder import check_finite_vectors
    from elmo_engine.errors import InputError

    arr = np.zeros((3, 4, 8), np.float32)
    check_finite_vectors(arr, ["a"] * 4)
    arr[2, 1, 3] = np.nan
    with pytest.raises(InputError, match="from layer 2"):
        check_finite_vectors(arr, ["a"] * 4)


# ---- options -----------------------------------------------------------------------------------
@pytest.mark.parametrize("argv, option", [
    (["embed", "x", "y", "--device", "foo"], "--device"),
    (["train-lm", "a", "--dev", "b", "--out", "c", "--checkpoint-every", "0"], "--checkpoint-every"),
    (["train-lm", "a", "--dev", "b", "--out", "c", "--threads", "-1"], "--threads"),
    (["train-lm", "a", "--dev", "b", "--out", "c", "--dropout", "1.5"], "--dropout"),
    (["train-lm", "a", "--dev", "b", "--out", "c", "--lr", "nan"], "--lr"),
    (["layers", "--threads", "0"], "--threads"),
    (["layers", "--cka-tokens", "1e9"], "--cka-tokens"),
    (["probe", "--task", "demo-pos", "--out", "o", "--epochs", "0"], "--epochs"),
    (["probe", "--task", "demo-pos", "--out", "o", "--min-delta", "-1"], "--min-delta"),
    (["contexts", "--word", "w", "--neighbours", "-1"], "--neighbours"),
    (["project", "x", "--csv", "c", "--n-neighbors", "1"], "--n-neighbors"),
    (["project", "x", "--csv", "c", "--min-dist", "inf"], "--min-dist"),
    (["eval-lm", "t", "--unroll", "0"], "--unroll"),
    (["export", "vectors", "a", "b", "--mix-gamma", "nan"], "--mix-gamma"),
    (["embed", "x", "y", "--batch-size", "many"], "--batch-size"),
])
def test_numeric_options_are_checked_while_parsing(capsys, argv, option):
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 1 and option in err and len(err.strip().splitlines()) == 1, err


def test_every_numeric_option_has_a_checked_type():
    import argparse

    from elmo_engine.cli.main import build_parser

    def walk(p):
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for sub in a.choices.values():
                    yield from walk(sub)
            else:
                yield a

    actions = list(walk(build_parser()))
    assert not [a.dest for a in actions if a.type in (int, float)]
    assert all(a.type is not None for a in actions if a.dest == "device")
