"""The Units view's saved results and its report section (issue 40): what a workspace keeps is
read back only when every field is valid and within bounds, and the report states it (tables,
the top-k curves figure) from the workspace alone, through the one report path."""
from __future__ import annotations

import copy

import pytest

from elmo_engine.analysis.report import build_report
from elmo_engine.analysis.units.ablate import Accuracy, WordPredictions
from elmo_engine.analysis.units.report import (Measured, SavedIntervention, results_doc,
                                               saved_results, units_part)
from elmo_engine.io.figures import FigureStyle
from elmo_engine.io.workspace_file import WorkspaceData

WORDS = ("The", "keys", "are")


def ranking(layer=1, direction="forward", state="c"):
    curve = [{"k": k, "method": m, "top": 0.5 + 0.1 * j, "random": [0.3, 0.4],
              "random_mean": 0.35, "random_sd": 0.0707} for j, k in enumerate((1, 4, 16))
             for m in ("mean-diff", "elastic-net")]
    return {"layer": layer, "direction": direction, "state": state, "accuracy_all": 0.9,
            "majority": 0.2, "top_units": {"mean-diff": [78, 403, 5], "elastic-net": [3, 78]},
            "curve": curve}


def intervention():
    before = WordPredictions(WORDS, ((1.0, 2.0, 3.0), (4.0, 5.0, 6.0)),
                             (("A", "key", "is"), ("the", "keys", ".")))
    after = WordPredictions(WORDS, ((1.5, 2.5, 3.5), (4.0, 5.0, 6.0)),
                            (("A", "key", "are"), ("the", "keys", ".")))
    acc = Accuracy({"all": (1.0, 0.8, 1.0), "agreement_attractors": (1.0, 0.8, 1.0)})
    acc2 = Accuracy({"all": (0.4, 0.8, 0.7), "agreement_attractors": (0.4, 0.8, 0.7)})
    return SavedIntervention("layer 1 forward c, units 78 403 zeroed at every position",
                             before, after, acc, acc2,
                             (Measured("probe accuracy, layer 2", 0.93, 0.91, "demo POS"),))


SHOWCASE = {"note": "Top layer's cells ranked for feats:Number",
            "rows": [{"set": "all", "k": 0, "top": [1.0, 0.8, 1.0], "random": None},
                     {"set": "all", "k": 2, "top": [0.4, 0.8, 0.73],
                      "random": [[1.0, 0.0], [0.81, 0.02], [1.0, 0.0]]}]}


def doc():
    return results_doc("abc", {"source": "the demo POS task's UPOS tags", "tokens": 20000,
                               "classes": ["NOUN", "VERB"], "rankings": [ranking()]},
                       intervention(), copy.deepcopy(SHOWCASE))


def test_saved_results_round_trip_and_bad_parts_are_dropped():
    got = saved_results(doc())
    assert got is not None and got.model == "abc" and got.intervention == intervention()
    assert got.ranking["rankings"][0]["top_units"]["mean-diff"] == [78, 403, 5]
    assert got.showcase == SHOWCASE
    for path, value in ((("ranking", "rankings", 0, "accuracy_all"), 1.5),
                        (("ranking", "rankings", 0, "curve", 0, "random"), ["x"]),
                        (("ranking", "classes"), ["x" * 300]),
                        (("intervention", "before", "surprisal", 0), [1.0, 2.0]),
                        (("intervention", "pairs", "all", "after"), [0.1, 0.2]),
                        (("intervention", "words"), []),
                        (("showcase", "rows", 1, "random", 0), [1.2, 0.0])):
        d = copy.deepcopy(doc())
        target = d
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        kept = saved_results(d)
        part = path[0]
        assert kept is not None and getattr(kept, part) is None, path   # the other part stays
    d = doc()
    d["ranking"]["rankings"] = [ranking()] * 65                          # over the bound
    d["intervention"] = d["showcase"] = None
    assert saved_results(d) is None and saved_results("nonsense") is None


def test_an_intervention_without_the_lm_part_round_trips_when_it_has_a_measure():
    """Re-measured without a softmax: the measures alone. Kept as such; with no measure, or with
    half an LM part, dropped."""
    from elmo_engine.analysis.units.report import intervention_doc, saved_intervention

    full = intervention()
    bare = SavedIntervention(full.description, None, None, None, None, full.measures)
    d = intervention_doc(bare)
    assert set(d) == {"description", "measures"}
    got = saved_intervention(d)
    assert got == bare and not got.scored_lms and full.scored_lms
    assert saved_intervention({**d, "measures": []}) is None
    assert saved_intervention({**d, "words": list(WORDS)}) is None       # half an LM part
    assert saved_intervention({**d, "measures": [{"name": "x", "before": "nan", "after": 1}]}
                              ) is None


def test_the_report_states_the_saved_results(tmp_path):
    data = WorkspaceData(views={"units": {"results": doc()}})
    spec = build_report(data, "ws.elmows.json", None, tmp_path, FigureStyle(formats=("png",)))
    tables = {t.name: t for t in spec.tables}
    assert {"units_ranking", "units_topk_curve", "units_intervention_words",
            "units_intervention_pairs", "units_intervention_measures"} <= set(tables)
    row = tables["units_ranking"].rows[0]
    assert row["top (mean diff)"] == "78 403 5" and row["k=4 top / random"] == \
        "0.600 / 0.350 ± 0.071"
    words = tables["units_intervention_words"].rows
    assert words[2]["forward bits before"] == 3.0 and words[2]["forward top after"] == "are"
    pairs = tables["units_intervention_pairs"].rows
    assert pairs[0]["pairs"] == "all" and pairs[0]["forward after"] == 0.4
    assert len(tables["units_topk_curve"].rows) == 6
    ablated = tables["units_number_ablation"].rows
    assert ablated[1]["forward top"] == 0.4 and ablated[1]["backward random"] == "0.810 ± 0.020"
    assert "backward random" not in ablated[0]
    assert [f.path.name for f in spec.figures if "units" in f.path.name] == \
        ["units_topk_curve.png"]
    # another model's results: a note, no tables
    part = units_part({"results": doc()}, None, FigureStyle(), checksum="other")
    assert not part.tables and "another model" in part.notes[0]
    assert units_part({"results": {"model": "abc"}}, None, FigureStyle()).tables == []


@pytest.mark.parametrize("n", [1, 3, 8])
def test_topk_figure_has_a_panel_per_ranking(n):
    from elmo_engine.io.figures.units import topk_figure

    fig = topk_figure([ranking(layer=j % 2) for j in range(n)], "title")
    assert len(fig.axes) == n
    assert fig.axes[0].get_xscale() == "log"
    labels = [line.get_label() for line in fig.axes[0].get_lines()]
    assert "top k (class-mean difference)" in labels and "k random (mean ± sd)" in labels
