"""Each view's model on its own: plain Python, no Qt, no window (the views draw these values)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from elmo_engine.analysis.probes.reference import load_reference_runs
from elmo_explorer.views.contexts.model import (ContextsModel, ContextsSettings, groups_from_state,
                                                neighbour_corpus, settings_from_state, valid_ref)
from elmo_explorer.views.layers.model import LayersModel, LayersSettings, valid_result
from elmo_explorer.views.probes.model import ProbesModel
from elmo_explorer.views.projection.model import (ProjectionModel, as_float, as_int,
                                                  mix_weights_text, parse_weights)
from elmo_explorer.state.words import default_word

TOKENS = [["the", "bank", "of", "the", "river"], ["a", "bank", "loan"], ["river", "bank"]]


def test_the_models_import_without_qt():
    code = ("import sys\n"
            "class Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] in ('PySide6', 'shiboken6', 'pyqtgraph'):\n"
            "            raise ImportError('Qt is blocked: ' + name)\n"
            "sys.meta_path.insert(0, Block())\n"
            "import elmo_explorer.views.contexts.model, elmo_explorer.views.layers.model\n"
            "import elmo_explorer.views.probes.model, elmo_explorer.views.projection.model\n"
            "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


# ---- contexts ------------------------------------------------------------------------------
def test_contexts_model_is_ready_when_both_jobs_are_done():
    m = ContextsModel()
    assert not m.done("compare") and not m.ready
    assert m.done("neighbours") and m.ready           # just became ready: True once
    assert not m.done("neighbours")
    m.reset_ready()
    assert not m.ready and m.pending == {"compare", "neighbours"}


def test_contexts_model_carries_group_labels_with_their_sentences():
    m = ContextsModel()
    m.carry_groups(["s0", "s1", "s2"])
    m.groups = {"bank": {(0, 1): "river", (1, 1): "money", (2, 1): "river"}}
    m.carry_groups(["new", "s2", "s0"])                # s1 gone, the others moved
    assert m.groups == {"bank": {(2, 1): "river", (1, 1): "river"}}


def test_contexts_view_state_round_trips_through_the_validators():
    m = ContextsModel(word="bank", query=(1, 1))
    m.groups = {"bank": {(0, 1): "river"}}
    s = ContextsSettings(True, "forward", True, [0.2, 0.3, 0.5], 7, False)
    state = m.view_state(s)
    assert state["word"] == "bank" and state["selected"] == {"sentence": 1, "token": 1}
    back = settings_from_state(state, ContextsSettings(False, "both", False, [1, 1, 1], 10, True))
    assert back == s
    assert groups_from_state(state["groups"], TOKENS) == {"bank": {(0, 1): "river"}}
    bad = settings_from_state({"k": True, "direction": "sideways", "weights": [1, -1, 0]}, s)
    assert bad == s                                    # invalid values are ignored
    assert valid_ref(TOKENS, 2, 1) and not valid_ref(TOKENS, 2, 2) and not valid_ref(TOKENS, True, 0)
    assert neighbour_corpus(TOKENS[:1], [["a", "bank"]], [["ref"]]) == [TOKENS[0], ["a", "bank"],
                                                                        ["ref"]]
    assert state["reference_set"] is True and back.reference_set is True


def test_the_default_word():
    assert default_word(TOKENS) == "bank"
    assert default_word([["river", "river", "a"], ["house"]]) == "river"
    assert default_word([]) == ""


# ---- layers --------------------------------------------------------------------------------
def test_layers_model_caches_results_by_model_corpus_and_size():
    m = LayersModel(settings=LayersSettings(sentences=50))
    key = m.key("abc", "")
    assert key[0] == "abc" and key[1] == "fp32" and key[3] == 50 and not m.cached(key)
    result = {"model": {"checksum": "abc"}}
    m.store(key, result, "analysis")
    assert m.cached(key) and m.result is result and m.analysis == "analysis"
    m.compare = {"cka": {}}
    m.show(key)                                         # the same result: the comparison stays
    assert m.compare is not None
    m.model_changed()
    assert m.result is None and m.compare is None and m.cached(key)


def test_layers_model_restores_results_only_for_the_same_model():
    m = LayersModel()
    m.restore({"settings": {"sentences": 123}, "result": None, "mdl": {}}, "abc")
    assert m.settings.sentences == 123 and m.result is None
    m.restore("not a dict", "abc")
    assert m.settings.sentences == 123
    result = {"model": {"checksum": "abc"}, "corpus": {"path": "c.txt"},
              "contextuality": {"layers": []},
              "cka": {"rows": ["layer 0", "layer 1"], "columns": ["layer 0", "layer 1"],
                      "matrix": [[1.0, 0.5], [0.5, 1.0]]}}
    assert valid_result(result)
    other = LayersModel()
    other.restore({"result": result, "compare": None}, "another model")
    assert other.result is None                          # computed with another model: dropped
    same = LayersModel()
    same.restore({"result": result, "compare": None}, "abc")
    assert same.result is result                         # the same model: shown again


# ---- probes --------------------------------------------------------------------------------
def test_probes_model_keeps_one_run_of_curves_per_seed():
    m = ProbesModel()
    m.new_run()
    m.on_event({"phase": "start", "name": "t"})
    m.on_event({"phase": "layers", "seed": 0, "loss": [1.0, 0.9], "dev": [0.5, 0.6]})
    m.on_event({"phase": "layers", "seed": 0, "loss": [0.8, 0.7], "dev": [0.6, 0.7]})
    assert m.curves == {"layers": [[1.0, 0.9, 0.5, 0.6], [0.8, 0.7, 0.6, 0.7]]}
    m.on_event({"phase": "mix", "seed": 1, "loss": [0.5], "dev": [0.8]})
    assert m.curves == {"mix": [[0.5, 0.8]]}            # a new seed starts its own curves


def test_probes_model_recorded_runs_give_way_to_the_users():
    runs, _ = load_reference_runs()
    m = ProbesModel()
    m.show_recorded(runs)
    assert m.recorded and m.runs and m.to_dicts() == [] and "Recorded results" in m.recorded_text()
    assert len(m.colours()) == len(runs) and m.table_rows()
    m.add_results(runs[:1])
    assert not m.recorded and m.runs == runs[:1] and m.recorded_text() == ""
    saved = m.to_dicts()
    m.clear()
    assert m.runs == [] and m.to_dicts() == []
    m.restore(saved)
    assert [r.name for r in m.runs] == [runs[0].name]



def test_the_recorded_probe_commands_run_from_the_repository_root(repo_root, monkeypatch):
    """The Probes view quotes each recorded run's command ("Made with"): it parses, and its
    output is not refused (it once named resources/, which no command writes, with --force)."""
    import shlex

    from elmo_engine.cli.main import build_parser
    from elmo_engine.cli.outputs import guard_outputs

    runs, problems = load_reference_runs()
    assert problems == [] and len(runs) == 2
    monkeypatch.chdir(repo_root)
    for run in runs:
        argv = shlex.split(run.command)
        assert argv[:2] == ["elmo-explorer", "probe"] and "--force" not in argv
        args = build_parser([argv[1]]).parse_args(argv[1:])
        assert args.out == Path(args.out.name)              # beside the user, not in resources/
        guard_outputs(args)                                 # raises InputError when refused


# ---- projection ----------------------------------------------------------------------------
def test_projection_model_and_its_state_parsers():
    m = ProjectionModel()
    m.shown = {1: "b", 0: "a"}
    assert m.drawn() == ["a", "b"]
    m.clear()
    assert m.tokens is None and m.shown == {}
    assert as_int(3) == 3 and as_int(True) is None and as_int(2.5) is None
    assert as_float(2) == 2.0 and as_float(float("nan")) is None and as_float(False) is None
    assert parse_weights("0.2, 0.3 0.5") == [0.2, 0.3, 0.5] and parse_weights("x") is None
    assert mix_weights_text({"mix_weights": [1, 2]}) == "1, 2"
    assert mix_weights_text({"mix_weights": None}) == ""
    assert mix_weights_text({"mix_weights": [-1]}) is None and mix_weights_text({}) is None


@pytest.mark.parametrize("bad", [{"settings": []}, {"settings": {"sentences": "many"}}])
def test_layers_settings_ignore_what_is_not_valid(bad):
    base = LayersSettings(sentences=77)
    assert LayersSettings.from_dict(bad.get("settings"), base).sentences == 77
