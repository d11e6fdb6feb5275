"""The CLI convention (issue 29 item 3, docs/guide/cli.md), one table over every command.

Every command of the parser must have a row in :data:`TABLE` (a new command without one fails
:func:`test_every_command_has_a_row`, naming it). Each row says how to run the command on tiny
inputs (the vendored AllenNLP test model, or the bundled demo model where a softmax is needed)
and what it writes; the tests then hold every row to the same rules: ``--json`` parses from
stdout and stdout holds nothing else; ``-o FILE`` writes the file (stdout empty) and ``-o -``
writes to stdout; a missing input file exits 1 with one stderr line ``elmo-explorer: error: …``
naming it; an unknown option exits 2; a bad value exits 1. The shared options are checked on the
parsers themselves: the same names, values and defaults everywhere.
"""
from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

from support import FIXTURES
from elmo_engine.cli.common import LAYER_CHOICES, MIX_WEIGHTS_HELP
from elmo_engine.cli.parsing import device_type
from elmo_engine.cli.main import build_parser, main
from elmo_engine.io.workspace_file import WorkspaceData, save_workspace

pytestmark = pytest.mark.usefixtures("torch_one_thread")

TINY = FIXTURES / "allennlp"                     # vendored: 2 LSTM layers, 32 wide, no softmax
SENTENCES = ["He sat on the bank of the river .", "She went to the bank .",
             "The bank lends money to the firm .", "They walked along the river bank ."]
MISSING = "no_such_input.txt"


@dataclass(frozen=True)
class Row:
    """How one command is run. ``argv`` may hold ``{name}`` placeholders filled from the
    module's inputs (:func:`inputs`). ``out``: ``"results"`` (-o FILE receives what stdout
    would), ``"file"`` (-o names the command's output file; ``-o -`` sends its bytes to
    stdout), ``"folder"`` (-o names a folder; ``-o -`` is refused with exit 1) or ``None``
    (no -o: ``why``). ``bad``: argv whose input ``{missing}`` does not exist (the error names
    ``named``), None with ``why``."""

    argv: Tuple[str, ...]
    json: bool = True
    out: Optional[str] = "results"
    bad: Optional[Tuple[str, ...]] = None
    named: str = MISSING
    run_out: bool = True               # run -o FILE / -o - (False: too slow; -o - refusal only)
    why: str = ""


#: the commands that read sentence files, tokenized as typed text unless --pretokenized
TEXT_READERS = {"embed", "train-lm", "eval-lm", "lm", "contexts", "project", "export vectors",
                "layers", "index", "search", "chars perturb", "chars nonce",
                "units top", "units pattern"}
CK = ("--checkpoint", "{tiny}", "--device", "cpu")
TABLE: Dict[str, Row] = {
    "info": Row(("info", "--checkpoint", "{tiny}"),
                bad=("info", "--checkpoint", "{missing}")),
    "eval-lm": Row(("eval-lm", "{text}", "--no-progress", "--device", "cpu", "--batch-size", "2",
                    "--unroll", "5"),
                   bad=("eval-lm", "{missing}", "--no-progress", "--device", "cpu")),
    "lm": Row(("lm", "{text}", "--top-k", "2", "--device", "cpu"),
              bad=("lm", "{missing}", "--device", "cpu")),
    "contexts": Row(("contexts", "--word", "bank", "--sentences", "{text}", *CK),
                    bad=("contexts", "--word", "bank", "--sentences", "{missing}", *CK)),
    "layers": Row(("layers", "{text}", "--min-count", "2", "--baseline-samples", "10",
                   "--cka-tokens", "20", *CK),
                  bad=("layers", "{missing}", *CK)),
    "search": Row(("search", "{index}", "--sentence", "the bank of the river", "--word", "bank",
                   "-k", "2", "--device", "cpu"),
                  bad=("search", "{missing}", "--sentence", "a bank", "--word", "bank"),
                  named="no_such_input.txt"),
    "chars word": Row(("chars", "word", "blorft", "recieve", "--neighbours", "2", *CK),
                      bad=("chars", "word", "blorft", "--vocab", "{missing}", *CK)),
    "chars filters": Row(("chars", "filters", "--top", "2", "--vocab", "{text}", *CK),
                         bad=("chars", "filters", "--vocab", "{missing}", *CK)),
    "chars perturb": Row(("chars", "perturb", "--sentence", "the bank of the river", "--word",
                          "bank", "--per-type", "1", *CK),
                         bad=("chars", "perturb", "--sentences", "{missing}", "--word", "bank",
                              *CK)),
    "chars nonce": Row(("chars", "nonce", "--sentence", "He sat on the blorft of the river .",
                        "--word", "blorft", "--top-k", "3", "--device", "cpu"),
                       bad=("chars", "nonce", "--sentence", "a b", "--word", "b", "--vocab",
                            "{missing}", "--device", "cpu")),
    "senses": Row(("senses", "{index}", "--word", "bank", "--k-max", "2"),
                  bad=("senses", "{missing}", "--word", "bank")),
    "wsd-nn": Row(("wsd-nn", "--train", "{wsd_xml}", "--train-keys", "{wsd_keys}", "--test",
                   "{wsd_xml}", "--test-keys", "{wsd_keys}", *CK),
                  bad=("wsd-nn", "--train", "{missing}", "--train-keys", "{wsd_keys}", *CK)),
    "units rank": Row(("units", "rank", "--tsv", "{labelled}", "--k", "1", "--seeds", "2", *CK),
                      bad=("units", "rank", "--tsv", "{missing}", *CK)),
    "units top": Row(("units", "top", "{text}", "--unit", "3", "--show", "3", *CK),
                     bad=("units", "top", "{missing}", "--unit", "3", *CK)),
    "units pattern": Row(("units", "pattern", "{text}", "--sentence", "the bank", "--span", "1:2",
                          "--threshold", "-100", *CK),
                         bad=("units", "pattern", "{missing}", "--sentence", "a b", "--span",
                              "1:2", *CK)),
    "units ablate": Row(("units", "ablate", "--tsv", "{labelled}", "--pairs", "{pairs}", "--k", "1",
                         "--seeds", "2", "--device", "cpu"),
                        bad=("units", "ablate", "--tsv", "{labelled}", "--pairs", "{missing}",
                             "--device", "cpu")),
    "models list": Row(("models", "list"),
                       why="reads only the catalogue and the data folder"),
    "models get": Row(("models", "get", "small"), json=False, out=None,
                      bad=("models", "get", "no-such-model"), named="no-such-model",
                      why="prints the model's folder (for $(…)); downloads are tested against "
                          "a loopback server in test_models_download.py"),
    "models path": Row(("models", "path", "small"), json=False, out=None,
                       bad=("models", "path", "no-such-model"), named="no-such-model",
                       why="prints one folder, for --checkpoint $(…)"),
    "models verify": Row(("models", "verify"), json=False, out=None,
                         bad=("models", "verify", "no-such-model"), named="no-such-model",
                         why="a check: one line per file, exit 1 on a mismatch"),
    "models remove": Row(("models", "remove", "small"), json=False, out=None,
                         bad=("models", "remove", "no-such-model"), named="no-such-model",
                         why="deletes; prints what it freed"),
    "embed": Row(("embed", "{text}", *CK), json=False, out="file",
                 bad=("embed", "{missing}", "-o", "{tmp}/x.hdf5", *CK),
                 why="writes vectors; its result is the file"),
    "export vectors": Row(("export", "vectors", "{text}", "--format", "npz", *CK), json=False,
                          out="file",
                          bad=("export", "vectors", "{missing}", "-o", "{tmp}/x.npz", *CK),
                          why="writes vectors; its result is the file"),
    "project": Row(("project", "{text}", "--method", "pca", "-o", "{tmp}/coords.csv", *CK),
                   out="file", bad=("project", "{missing}", "-o", "{tmp}/x.csv", *CK)),
    "probe": Row(("probe", "--task", "tsv", "--train", "{labelled}", "--test", "{labelled}",
                  "--epochs", "2",
                  "--seeds", "1", *CK), out="file",
                 bad=("probe", "--task", "tsv", "--train", "{missing}", "--test", "{labelled}",
                      *CK)),
    "export report": Row(("export", "report", "{workspace}", "--word", "bank", *CK), json=False,
                         out="folder",
                         bad=("export", "report", "{missing}", "-o", "{tmp}/r", *CK),
                         why="writes a report folder"),
    "report": Row(("report", "{text}", "--word", "bank", "--dpi", "50", *CK), json=False,
                  out="folder", bad=("report", "{missing}", "--word", "bank", "-o", "{tmp}/r", *CK),
                  why="writes a report folder"),
    "index": Row(("index", "{text}", "--shard-size", "2", *CK), json=False, out="folder",
                 bad=("index", "{missing}", "-o", "{tmp}/ix2", *CK),
                 run_out=False, why="writes an index folder (built once by the fixture)"),
    "train-lm": Row(("train-lm", "{text}", "--dev", "{text}", "--preset", "tiny",
                     "--device", "cpu"), json=False, out="folder",
                    bad=("train-lm", "{missing}", "--dev", "{text}", "-o", "{tmp}/m"),
                    run_out=False, why="writes a model folder; training is tested in "
                                       "test_lm_train_cli.py"),
}


# ---- the parser -----------------------------------------------------------------------------
def _subparsers(parser) -> Dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices
    return {}


def commands() -> Dict[str, argparse.ArgumentParser]:
    """Every (sub)subcommand of the parser, by name: discovered, not listed."""
    out = {}
    for name, p in _subparsers(build_parser()).items():
        subs = _subparsers(p)
        for sub, q in (subs.items() if subs else [(None, p)]):
            out[name if sub is None else f"{name} {sub}"] = q
    return out


def _options(p) -> Dict[str, argparse.Action]:
    return {o: a for a in p._actions for o in a.option_strings}


def test_every_command_has_a_row():
    found = set(commands())
    missing = sorted(found - set(TABLE))
    assert not missing, (f"commands without a row in TABLE of {Path(__file__).name}: "
                         f"{', '.join(missing)}: add one saying how to run each")
    assert not sorted(set(TABLE) - found), "rows for commands the parser does not have"
    for name, row in TABLE.items():           # a row opts out of a rule only with a reason
        assert row.why or (row.json and row.out and row.bad), name


def test_shared_options_have_one_name_and_one_set_of_values():
    for name, p in commands().items():
        opts = _options(p)
        positional = [a.dest for a in p._actions if not a.option_strings]
        assert "checkpoint" not in positional, f"{name}: --checkpoint, never positional"
        assert not {"output", "outdir", "out"} & set(positional), f"{name}: outputs are -o"
        assert "--weights" not in opts and "--csv" not in opts, name
        if "--device" in opts:
            assert opts["--device"].default == "auto" and opts["--device"].type is device_type
            if name != "train-lm":                         # it makes the model
                assert "--checkpoint" in opts, f"{name} runs a model: --checkpoint"
        if "--checkpoint" in opts:
            assert opts["--checkpoint"].default is None, name
        if "--layers" in opts:
            assert tuple(opts["--layers"].choices) == LAYER_CHOICES, name
            assert opts["--layers"].default == "all" and "--mix-weights" in opts, name
        if "--mix-weights" in opts:
            a = opts["--mix-weights"]
            assert a.default is None and a.help.startswith(MIX_WEIGHTS_HELP), name
        if "--layer" in opts:                              # layer numbers, never a choice
            assert opts["--layer"].choices is None, name
        for flag in ("--force", "--json"):
            if flag in opts:
                assert isinstance(opts[flag], argparse._StoreTrueAction), f"{name}: {flag}"
        if "--out" in opts or "-o" in opts:
            assert opts["--out"] is opts["-o"], f"{name}: -o and --out are one option"
            assert "--force" in opts, f"{name}: an output is replaced only with --force"
        if name in TEXT_READERS:
            assert "--pretokenized" in opts, f"{name} reads sentence files: --pretokenized"
        if "--checkpoint" in opts and name not in ("info", "export report"):
            assert "--device" in opts, f"{name} runs a model: --device"
        if "--precision" in opts:
            assert {"fp32", "bf16"} <= set(opts["--precision"].choices), name
        row = TABLE.get(name)
        if row is not None:
            assert ("--json" in opts) == row.json, f"{name}: --json as the table says"
            assert ("--out" in opts) == (row.out is not None), f"{name}: -o as the table says"


# ---- the inputs -----------------------------------------------------------------------------
WSD_XML = """<?xml version="1.0" encoding="UTF-8" ?>
<corpus lang="en" source="t">
<text id="d000">
<sentence id="d000.s000">
<wf lemma="he" pos="PRON">He</wf>
<wf lemma="sit" pos="VERB">sat</wf>
<wf lemma="on" pos="ADP">on</wf>
<wf lemma="the" pos="DET">the</wf>
<instance id="d000.s000.t000" lemma="bank" pos="NOUN">bank</instance>
<wf lemma="." pos=".">.</wf>
</sentence>
<sentence id="d000.s001">
<wf lemma="the" pos="DET">The</wf>
<instance id="d000.s001.t000" lemma="bank" pos="NOUN">bank</instance>
<wf lemma="lend" pos="VERB">lends</wf>
<wf lemma="." pos=".">.</wf>
</sentence>
</text>
</corpus>
"""
WSD_KEYS = "d000.s000.t000 bank%1:17:01::\nd000.s001.t000 bank%1:14:00::\n"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Dict[str, str]:
    root = tmp_path_factory.mktemp("cli_convention")
    text = root / "in.txt"
    text.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    labelled = root / "labelled.tsv"
    labelled.write_text("\n\n".join("\n".join(f"{w}\t{'N' if w in ('bank', 'river', 'money') else 'X'}"
                                              for w in s.split()) for s in SENTENCES * 3)
                        + "\n", encoding="utf-8")
    (root / "pairs.tsv").write_text("set\tgood\tbad\nagr\tThe keys are here .\tThe keys is here .\n"
                                    "agr\tThe key is here .\tThe key are here .\n",
                                    encoding="utf-8")
    (root / "wsd.xml").write_text(WSD_XML, encoding="utf-8")
    (root / "wsd.key").write_text(WSD_KEYS, encoding="utf-8")
    workspace = root / "a.elmows.json"
    save_workspace(workspace, WorkspaceData(sentences=SENTENCES))
    index = root / "ix"
    code = main(["index", str(text), "-o", str(index), "--shard-size", "2", "--checkpoint",
                 str(TINY), "--device", "cpu"])
    assert code == 0 and (index / "index.json").is_file()
    return {"tiny": str(TINY), "text": str(text), "labelled": str(labelled),
            "wsd_xml": str(root / "wsd.xml"), "pairs": str(root / "pairs.tsv"), "wsd_keys": str(root / "wsd.key"),
            "workspace": str(workspace), "index": str(index), "root": str(root)}


@pytest.fixture
def env(inputs, tmp_path, monkeypatch):
    """The inputs plus this test's folder (the current folder: a file named '-' would land
    here) and an empty data folder for ``models``."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ELMO_EXPLORER_DATA", str(tmp_path / "data"))
    return dict(inputs, tmp=str(tmp_path), missing=str(tmp_path / MISSING))


def fill(argv, env) -> List[str]:
    return [a.format(**env) for a in argv]


def run(argv, capsysbinary) -> Tuple[int, bytes, str]:
    try:
        code = main(list(argv))
    except SystemExit as e:                       # argparse: usage errors and bad values
        code = e.code
    cap = capsysbinary.readouterr()
    return code, cap.out, cap.err.decode("utf-8")


def one_error_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("elmo-explorer: error: "), err
    return lines[0]


ROWS = sorted(TABLE)


# ---- the rules, row by row ------------------------------------------------------------------
@pytest.mark.parametrize("name", [n for n in ROWS if TABLE[n].json])
def test_json_is_a_flag_and_stdout_holds_only_the_document(name, env, capsysbinary):
    code, out, err = run(fill(TABLE[name].argv, env) + ["--json"], capsysbinary)
    assert code == 0, err
    doc = json.loads(out.decode("utf-8"))          # nothing else on stdout
    assert isinstance(doc, (dict, list)) and doc, name
    assert not Path(env["tmp"], "-").exists()


@pytest.mark.parametrize("name", [n for n in ROWS if TABLE[n].out and TABLE[n].run_out])
def test_out_file_and_out_dash(name, env, capsysbinary):
    row = TABLE[name]
    argv = fill(row.argv, env)
    target = Path(env["tmp"], "result" + {"file": ".npz" if "npz" in argv else
                                         ".csv" if name == "project" else
                                         ".json" if name == "probe" else ".hdf5",
                                         "folder": "", "results": ".txt"}[row.out])
    code, out, err = run(argv + ["-o", str(target)], capsysbinary)
    assert code == 0, err
    if row.out == "folder":
        assert target.is_dir() and any(target.iterdir())
    else:
        assert target.is_file() and target.stat().st_size > 0
    if row.out == "results":
        assert out == b"", f"{name}: -o FILE leaves stdout empty"
    code, out, err = run(argv + ["-o", str(target)], capsysbinary)
    assert code == 1 and "--force" in one_error_line(err), f"{name}: an existing output"
    code, out, err = run(argv + ["-o", "-"], capsysbinary)
    if row.out == "folder":
        assert code == 1 and "stdout" in one_error_line(err), name
        return
    assert code == 0, err
    assert not Path(env["tmp"], "-").exists(), f"{name}: -o - wrote a file named '-'"
    if name in ("embed",):
        assert out.startswith(b"\x89HDF"), name
    elif "npz" in argv:
        assert out.startswith(b"PK"), name
    elif name == "project":
        assert out.decode("utf-8").splitlines()[0] == target.read_text("utf-8").splitlines()[0]
    elif row.out == "results":                  # the same results, there or here
        assert out.decode("utf-8").splitlines()[0] == target.read_text("utf-8").splitlines()[0]
    else:
        assert json.loads(out.decode("utf-8"))["layers"], name      # probe: the results JSON
    if row.json and row.out == "results":
        code, out, err = run(argv + ["--json", "-o", str(target), "--force"], capsysbinary)
        assert code == 0 and out == b"" and json.loads(target.read_text("utf-8")), err


@pytest.mark.parametrize("name", [n for n in ROWS if TABLE[n].out == "folder"
                                  and not TABLE[n].run_out])
def test_a_folder_output_is_never_stdout(name, env, capsysbinary):
    code, _, err = run(fill(TABLE[name].argv, env) + ["-o", "-"], capsysbinary)
    assert code == 1 and "stdout" in one_error_line(err), name


@pytest.mark.parametrize("name", [n for n in ROWS if TABLE[n].bad])
def test_bad_input_is_one_line_naming_it_and_exit_1(name, env, capsysbinary):
    code, out, err = run(fill(TABLE[name].bad, env), capsysbinary)
    assert code == 1, err
    assert TABLE[name].named in one_error_line(err), name
    assert out == b"", name


@pytest.mark.parametrize("name", ROWS)
def test_usage_error_exits_2_and_bad_value_exits_1(name, env, capsysbinary):
    argv = fill(TABLE[name].argv, env)
    if TABLE[name].out in ("file", "folder"):
        argv += ["-o", str(Path(env["tmp"], "never"))]
    code, out, err = run(argv + ["--no-such-option"], capsysbinary)
    assert code == 2 and "--no-such-option" in one_error_line(err), name
    opts = _options(commands()[name])
    if "--device" in opts:
        code, _, err = run(argv + ["--device", "warp"], capsysbinary)
        assert code == 1 and "--device" in one_error_line(err), name
    if "--layers" in opts:
        code, _, err = run(argv + ["--layers", "each"], capsysbinary)
        assert code == 1 and "--layers" in one_error_line(err), name


def test_a_missing_command_or_argument_is_usage(capsysbinary):
    code, _, err = run(["no-such-command"], capsysbinary)
    assert code == 2 and "no-such-command" in one_error_line(err)
    code, _, err = run(["contexts"], capsysbinary)               # --word is required
    assert code == 2 and "--word" in one_error_line(err)


def test_a_value_that_starts_with_a_dash_says_how_to_write_it(env, capsysbinary):
    """``--span -1:2`` is argparse's usage error (it reads ``-1:2`` as an option): the line
    says to write ``--span=-1:2``, which then reaches the command's own check."""
    corpus = Path(env["tmp"], "c.txt")
    corpus.write_text("the cat sat .\n", encoding="utf-8")
    base = ["units", "pattern", str(corpus), "--sentence", "the cat sat"]
    code, _, err = run(base + ["--span", "-1:2"], capsysbinary)
    line = one_error_line(err)
    assert code == 2 and "argument --span: expected one argument (if the value starts with " \
        "'-', write --span=VALUE)" in line, line
    code, _, err = run(base + ["--span=-1:2"], capsysbinary)         # now the command's check
    assert code == 1 and "--span" in one_error_line(err) and "-1" in err, err
    code, _, err = run(["embed", str(corpus), "-o"], capsysbinary)  # the long name, short given
    assert code == 2 and "write --out=VALUE" in one_error_line(err)


def test_layers_mix_has_one_default_equal_weights(env, capsysbinary):
    """``--layers mix`` without ``--mix-weights`` is the equal-weight mix in ``embed`` and
    ``export vectors`` alike: with γ = 1 the plain average of the layers."""
    import h5py
    import numpy as np

    tmp = Path(env["tmp"])
    got = {}
    for layers in ("mix", "average"):
        out = tmp / f"{layers}.hdf5"
        code, _, err = run(["embed", env["text"], "-o", str(out), "--layers", layers, *fill(CK, env)],
                           capsysbinary)
        assert code == 0, err
        with h5py.File(out, "r") as fh:
            got[layers] = fh["1"][()]
        vec = tmp / f"v-{layers}.npz"
        code, _, err = run(["export", "vectors", env["text"], "-o", str(vec), "--layers", layers,
                            *fill(CK, env)], capsysbinary)
        assert code == 0, err
        with np.load(vec, allow_pickle=False) as z:
            got["v-" + layers] = z["1"]
    assert got["mix"].shape == (6, 32) and np.allclose(got["mix"], got["average"], atol=1e-5)
    assert np.allclose(got["v-mix"], got["v-average"], atol=1e-5)
    code, _, err = run(["embed", env["text"], "-o", str(tmp / "x.hdf5"), "--mix-weights", "1,2,3",
                        *fill(CK, env)], capsysbinary)
    assert code == 1 and "--mix-weights only applies with --layers mix" in one_error_line(err)


def test_a_closed_pipe_ends_quietly(env, monkeypatch, capsys):
    """``elmo-explorer … --json | head -1``: the reader has gone; no error line, status 141."""
    class Closed:
        def write(self, _text):
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self):
            pass

    monkeypatch.setattr("sys.stdout", Closed())
    assert main(["models", "list", "--json"]) == 141
    assert capsys.readouterr().err == ""
