"""The Units view's last results as a workspace keeps them, and its share of a report.

The view saves its last ranking (``units rank --json``'s rankings,
:func:`~elmo_engine.analysis.units.rank.ranking_json`, with where the labels came from), its
last intervention's before / after (:func:`intervention_doc`) and its last Number showcase
(:func:`saved_showcase`) under ``views["units"]["results"]``
with the checksum of the model that made them. Reading them back (:func:`saved_results`) checks
every field and bound: anything malformed is dropped, never an error. :func:`units_part` turns
them into the report's tables and the top-k curves figure (Dalvi et al. 2019's how-few-units
curve; :mod:`elmo_engine.io.figures.units`) without running the model, so the app's Export
report… and ``elmo-explorer export report`` agree.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from elmo_engine.analysis.units.ablate import ALL, Accuracy, WordPredictions
from elmo_engine.io.report import ReportPart, ReportTable, saved_figures

VIEW = "units"
#: bounds on what a saved workspace may hold
MAX_RANKINGS = 64
MAX_CURVE = 128
MAX_TOP = 32
MAX_CLASSES = 1000
MAX_WORDS = 400
MAX_SETS = 64
MAX_TEXT = 500
METHODS = ("elastic-net", "mean-diff")
#: the k columns of the report's ranking table (the curve table has every k)
TABLE_KS = (1, 4, 16, 64, 256)


def _num(v: Any, low: float = -math.inf, high: float = math.inf) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            and low <= v <= high)


def _text(v: Any, limit: int = MAX_TEXT) -> bool:
    return isinstance(v, str) and len(v) <= limit


def _int(v: Any, low: int, high: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and low <= v <= high


# ---- the ranking ------------------------------------------------------------------------------
def valid_ranking(r: Any) -> bool:
    """One ranking of ``units rank --json`` (``top_scores`` optional), within the bounds."""
    if not isinstance(r, dict):
        return False
    if not (_int(r.get("layer"), 0, 63) and r.get("direction") in ("forward", "backward")
            and _text(r.get("state"), 2) and _num(r.get("accuracy_all"), 0, 1)
            and _num(r.get("majority"), 0, 1)):
        return False
    top = r.get("top_units")
    if not (isinstance(top, dict) and set(top) <= set(METHODS) and top and all(
            isinstance(u, list) and len(u) <= MAX_TOP and all(_int(x, 0, 1 << 20) for x in u)
            for u in top.values())):
        return False
    curve = r.get("curve")
    if not (isinstance(curve, list) and len(curve) <= MAX_CURVE):
        return False
    for p in curve:
        if not (isinstance(p, dict) and _int(p.get("k"), 1, 1 << 20)
                and p.get("method") in METHODS and _num(p.get("top"), 0, 1)
                and _num(p.get("random_mean"), 0, 1) and _num(p.get("random_sd"), 0, 1)
                and isinstance(p.get("random"), list) and len(p["random"]) <= 1000
                and all(_num(x, 0, 1) for x in p["random"])):
            return False
    return True


def ranking_doc(rankings: Sequence[dict], source: str, tokens: int,
                classes: Sequence[str]) -> Dict[str, Any]:
    """The saved form of a ranking: where its labels came from, its tokens and classes, and the
    rankings (``top_scores`` left out)."""
    return {"source": source, "tokens": tokens, "classes": list(classes),
            "rankings": [{k: v for k, v in r.items() if k != "top_scores"} for r in rankings]}


def saved_ranking(d: Any) -> Optional[Dict[str, Any]]:
    """The saved ranking ``d`` when every part of it is valid, else None."""
    if not (isinstance(d, dict) and _text(d.get("source")) and _int(d.get("tokens"), 1, 1 << 40)
            and isinstance(d.get("classes"), list) and len(d["classes"]) <= MAX_CLASSES
            and all(_text(c, 200) for c in d["classes"])
            and isinstance(d.get("rankings"), list) and 0 < len(d["rankings"]) <= MAX_RANKINGS
            and all(valid_ranking(r) for r in d["rankings"])):
        return None
    return d


# ---- the intervention -------------------------------------------------------------------------
@dataclass(frozen=True)
class Measured:
    """One more number before and after an intervention (a probe's accuracy, a word's
    similarity across contexts), with what it is."""

    name: str
    before: float
    after: float
    note: str = ""


@dataclass(frozen=True)
class SavedIntervention:
    """An intervention's before / after as the view shows it. Without a softmax the language
    models are not scored: ``before``, ``after`` and the pairs are None, and the ``measures``
    (a probe, a word's similarity) are all there is."""

    description: str
    before: Optional[WordPredictions]
    after: Optional[WordPredictions]
    pairs_before: Optional[Accuracy]
    pairs_after: Optional[Accuracy]
    measures: Tuple[Measured, ...] = ()

    @property
    def scored_lms(self) -> bool:
        """Whether the language models were scored (the checkpoint had a softmax)."""
        return self.before is not None


#: what a report and an export say of an intervention re-measured without a softmax
NOT_SCORED = "the language models were not scored (the checkpoint has no softmax)"


def intervention_doc(res: SavedIntervention) -> Dict[str, Any]:
    def words(p: WordPredictions) -> Dict[str, Any]:
        return {"surprisal": [list(s) for s in p.surprisal], "top": [list(t) for t in p.top]}

    doc: Dict[str, Any] = {"description": res.description}
    if (res.before is not None and res.after is not None and res.pairs_before is not None
            and res.pairs_after is not None):
        after = res.pairs_after.by_set
        doc |= {"words": list(res.before.words), "before": words(res.before),
                "after": words(res.after),
                "pairs": {name: {"before": list(b), "after": list(after[name])}
                          for name, b in res.pairs_before.by_set.items()}}
    doc["measures"] = [{"name": m.name, "before": m.before, "after": m.after, "note": m.note}
                       for m in res.measures]
    return doc


def saved_intervention(d: Any) -> Optional[SavedIntervention]:
    """The saved intervention ``d`` when every part of it is valid, else None (one without the
    language models' part holds at least one measure)."""
    try:
        if not _text(d["description"]):
            return None
        measures = []
        for m in d.get("measures", [])[:16]:
            if not (_text(m["name"], 200) and _num(m["before"]) and _num(m["after"])
                    and _text(m.get("note", ""))):
                return None
            measures.append(Measured(m["name"], float(m["before"]), float(m["after"]),
                                     m.get("note", "")))
        if not any(k in d for k in ("words", "before", "after", "pairs")):
            return SavedIntervention(d["description"], None, None, None, None,
                                     tuple(measures)) if measures else None
        words = d["words"]
        if not (isinstance(words, list) and 0 < len(words) <= MAX_WORDS
                and all(_text(w, 200) for w in words)):
            return None
        n = len(words)

        def predictions(p: Any) -> Optional[WordPredictions]:
            s, t = p["surprisal"], p["top"]
            if not (len(s) == 2 and len(t) == 2 and all(len(x) == n for x in (*s, *t))
                    and all(_num(v, 0, 1e4) for x in s for v in x)
                    and all(_text(v, 200) for x in t for v in x)):
                return None
            return WordPredictions(words=tuple(words),
                                   surprisal=(tuple(map(float, s[0])), tuple(map(float, s[1]))),
                                   top=(tuple(t[0]), tuple(t[1])))

        before, after = predictions(d["before"]), predictions(d["after"])
        pairs = d["pairs"]
        if (before is None or after is None or not isinstance(pairs, dict)
                or ALL not in pairs or len(pairs) > MAX_SETS):
            return None
        by: Dict[str, Dict[str, Tuple[float, float, float]]] = {"before": {}, "after": {}}
        for name, v in pairs.items():
            for when in by:
                acc = v[when]
                if not (_text(name, 200) and len(acc) == 3 and all(_num(x, 0, 1) for x in acc)):
                    return None
                by[when][name] = (float(acc[0]), float(acc[1]), float(acc[2]))
        return SavedIntervention(d["description"], before, after, Accuracy(by["before"]),
                                 Accuracy(by["after"]), tuple(measures))
    except (KeyError, TypeError, AttributeError):
        return None


# ---- the Number showcase ----------------------------------------------------------------------
def saved_showcase(d: Any) -> Optional[Dict[str, Any]]:
    """The Number showcase as the view keeps it — ``note`` and ``rows`` (``set``, ``k``, ``top``
    (forward, backward, combined), ``random`` None or three (mean, sd)) — when valid."""
    if not (isinstance(d, dict) and _text(d.get("note"), 2000) and isinstance(d.get("rows"), list)
            and 0 < len(d["rows"]) <= 1000):
        return None
    for r in d["rows"]:
        if not (isinstance(r, dict) and _text(r.get("set"), 200) and _int(r.get("k"), 0, 1 << 20)
                and isinstance(r.get("top"), list) and len(r["top"]) == 3
                and all(_num(v, 0, 1) for v in r["top"])):
            return None
        rand = r.get("random")
        if rand is not None and not (isinstance(rand, list) and len(rand) == 3 and all(
                isinstance(p, list) and len(p) == 2 and _num(p[0], 0, 1) and _num(p[1], 0, 1)
                for p in rand)):
            return None
    return d


# ---- what a workspace holds -------------------------------------------------------------------
@dataclass(frozen=True)
class SavedResults:
    """The view's saved results: the model's checksum, the ranking, the intervention and the
    Number showcase."""

    model: str
    ranking: Optional[Dict[str, Any]]
    intervention: Optional[SavedIntervention]
    showcase: Optional[Dict[str, Any]] = None


def results_doc(model: str, ranking: Optional[Dict[str, Any]],
                intervention: Optional[SavedIntervention],
                showcase: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    return {"model": model, "ranking": ranking,
            "intervention": None if intervention is None else intervention_doc(intervention),
            "showcase": showcase}


def saved_results(d: Any) -> Optional[SavedResults]:
    """``views["units"]["results"]`` read back (its valid parts; None when none is)."""
    if not isinstance(d, dict) or not _text(d.get("model"), 200):
        return None
    ranking = saved_ranking(d.get("ranking"))
    intervention = (saved_intervention(d["intervention"])
                    if isinstance(d.get("intervention"), dict) else None)
    showcase = saved_showcase(d.get("showcase"))
    if ranking is None and intervention is None and showcase is None:
        return None
    return SavedResults(d["model"], ranking, intervention, showcase)


# ---- the report -------------------------------------------------------------------------------
def _point(r: dict, k: int, method: str = "mean-diff") -> Optional[dict]:
    return next((p for p in r["curve"] if p["k"] == k and p["method"] == method), None)


def ranking_rows(doc: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The report's (and the view's TSV's) ranking table: one row per ranking."""
    rows = []
    for r in doc["rankings"]:
        row: Dict[str, Any] = {
            "layer": r["layer"], "direction": r["direction"], "state": r["state"],
            "all units": round(r["accuracy_all"], 4), "majority": round(r["majority"], 4),
            "top (mean diff)": " ".join(map(str, r["top_units"].get("mean-diff", [])[:5])),
            "top (elastic net)": " ".join(map(str, r["top_units"].get("elastic-net", [])[:5]))}
        for k in TABLE_KS:
            p = _point(r, k)
            if p is not None:
                row[f"k={k} top / random"] = (f"{p['top']:.3f} / {p['random_mean']:.3f} ± "
                                              f"{p['random_sd']:.3f}")
        rows.append(row)
    return rows


def curve_rows(doc: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Every point of every curve (the TSV / CSV of the top-k curves)."""
    return [{"layer": r["layer"], "direction": r["direction"], "state": r["state"],
             "k": p["k"], "method": p["method"], "top": round(p["top"], 4),
             "random_mean": round(p["random_mean"], 4), "random_sd": round(p["random_sd"], 4),
             "seeds": len(p["random"])}
            for r in doc["rankings"] for p in sorted(r["curve"], key=lambda p: (p["k"],
                                                                                 p["method"]))]


def word_rows(res: SavedIntervention) -> List[Dict[str, Any]]:
    b, a = res.before, res.after
    if b is None or a is None:
        return []
    rows = []
    for i, w in enumerate(b.words):
        row: Dict[str, Any] = {"position": i + 1, "word": w}
        for d, name in enumerate(("forward", "backward")):
            row |= {f"{name} top before": b.top[d][i], f"{name} top after": a.top[d][i],
                    f"{name} bits before": round(b.surprisal[d][i], 4),
                    f"{name} bits after": round(a.surprisal[d][i], 4)}
        rows.append(row)
    return rows


def pair_rows(res: SavedIntervention) -> List[Dict[str, Any]]:
    pb, pa = res.pairs_before, res.pairs_after
    if pb is None or pa is None:
        return []
    names = sorted(pb.by_set, key=lambda n: (n != ALL, n))
    return [{"pairs": n, **{f"{d} {w}": round(v[j], 4)
                            for j, d in enumerate(("forward", "backward", "combined"))
                            for w, v in (("before", pb.by_set[n]), ("after", pa.by_set[n]))}}
            for n in names]


def units_part(state: Any, figure_dir: Optional[Path], style,
               model_name: str = "the model", checksum: Optional[str] = None) -> ReportPart:
    """The report part of the Units view's saved ``state`` (empty when it holds no results;
    a note when they were made by another model than ``checksum``)."""
    part = ReportPart()
    saved = saved_results(state.get("results")) if isinstance(state, dict) else None
    if saved is None:
        return part
    if checksum is not None and saved.model != checksum:
        part.notes.append("Units: the saved results were made by another model than the "
                          "report's; they are left out.")
        return part
    if saved.ranking is not None:
        doc = saved.ranking
        caption = (f"{model_name}: units of each layer, direction and state ranked for "
                   f"{doc['source']} ({doc['tokens']:,} labelled words, "
                   f"{len(doc['classes'])} classes); held-out accuracy of the elastic net on "
                   "all units, the majority baseline, the five top units of each method, and a "
                   "probe on the top-k units (class-mean difference) against k random ones "
                   "(mean ± sd over the seeds).")
        part.tables.append(ReportTable("units_ranking", "Units ranked for a property",
                                       ranking_rows(doc), caption=caption))
        part.tables.append(ReportTable("units_topk_curve", "Units: the top-k curves, every point",
                                       curve_rows(doc), show=False,
                                       caption="Both methods, every k, random mean ± sd."))
        if figure_dir is not None:
            from elmo_engine.io.figures.units import topk_figure

            fig = topk_figure(doc["rankings"], f"{doc['source']}: a probe on the top-k units "
                                               "against k random units")
            part.figures += saved_figures(fig, figure_dir, "units_topk_curve",
                                          "How few units carry the property: " + caption, style)
    if saved.intervention is not None:
        res = saved.intervention
        if res.scored_lms:
            part.tables.append(ReportTable(
                "units_intervention_words", "Units: an intervention, word by word",
                word_rows(res), caption=f"{model_name}: {res.description}. Each LM's most "
                                        "probable word and its surprisal of the actual word "
                                        "(bits), before and after."))
            part.tables.append(ReportTable(
                "units_intervention_pairs", "Units: the minimal pairs before and after",
                pair_rows(res), caption="Accuracy per set and LM (combined: the sum of both "
                                        f"directions' log-probabilities); {res.description}."))
        if res.measures:
            lms = "" if res.scored_lms else f" {model_name}: {res.description}; {NOT_SCORED}."
            part.tables.append(ReportTable(
                "units_intervention_measures", "Units: more measures before and after",
                [{"measure": m.name, "before": round(m.before, 4), "after": round(m.after, 4),
                  "note": m.note} for m in res.measures],
                caption="A probe trained on the unchanged model scored on the held-out "
                        "sentences, and a word's mean cosine across its contexts." + lms))
    if saved.showcase is not None:
        part.tables.append(ReportTable(
            "units_number_ablation", "Units: Number cells ablated, top k against k random",
            showcase_rows(saved.showcase), caption=f"{model_name}: {saved.showcase['note']}"))
    return part


def showcase_rows(doc: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The Number showcase's table: per set and k, each LM's accuracy with its top k zeroed
    and the mean ± sd with k random zeroed (k 0: nothing zeroed)."""
    rows = []
    for r in doc["rows"]:
        row: Dict[str, Any] = {"pairs": r["set"], "cells zeroed": r["k"]}
        for j, name in enumerate(("forward", "backward", "combined")):
            row[f"{name} top"] = round(r["top"][j], 4)
            if r["random"] is not None:
                m, sd = r["random"][j]
                row[f"{name} random"] = f"{m:.3f} ± {sd:.3f}"
        rows.append(row)
    return rows
