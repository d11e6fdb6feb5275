"""The report of a workspace's analysis: its tables and figures, gathered from the engine.

:func:`report_spec` turns a workspace's state (sentences, selection, view parameters, probe runs)
into a :class:`~elmo_engine.io.report.ReportSpec`: the selected word compared across its
occurrences layer by layer (:mod:`elmo_engine.analysis.contexts.compare`: summary and similarity
tables, the heatmaps and the summary figure, groups kept) and the stored probe results (a table, the
scores and the scalar-mix weights), every figure drawn by :mod:`elmo_engine.io.figures`.
``elmo-explorer export report`` and the app's *Export report…* both use it; the app adds its own
figures. :func:`elmo_engine.io.report.write_report` writes the folder.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import List, Optional, Sequence

from elmo_engine.analysis.contexts import compare as cmp
from elmo_engine.analysis.probes.experiment import ProbeResult
from elmo_engine.analysis.probes.tables import RESULT_COLUMNS, results_rows
from elmo_engine.errors import InputError
from elmo_engine.io import figures as F
from elmo_engine.io.report import ReportFigure, ReportSpec, ReportTable
from elmo_engine.model.tokenize import MAX_SENTENCE_TOKENS, tokenize

#: at most this many occurrences get a per-layer similarity table shown on the report pages
MAX_SHOWN_OCCURRENCES = 12


def build_report_spec(loaded, emb, word: Optional[str], notes: List[str],
                      figure_dir: Path, formats: Sequence[str] = F.FORMATS) -> ReportSpec:
    """Embed a loaded workspace's sentences with the embedder ``emb`` and gather the tables and
    figures of its report."""
    data = loaded.data
    tokens = [tokenize(s, MAX_SENTENCE_TOKENS)[:MAX_SENTENCE_TOKENS] for s in data.sentences]
    acts = emb.embed(tokens) if tokens else []
    spec = report_spec(data, tokens, acts, emb.model.info.describe(), str(loaded.path), word,
                       notes, figure_dir, formats)
    _add_language_model(spec, emb, data.views, tokens, figure_dir, formats)
    return spec


# ---- the language model view (issue 27): the same part the app's view reports ---------------
def _add_language_model(spec: ReportSpec, emb, views: dict, tokens, figure_dir: Optional[Path],
                        formats: Sequence[str]) -> None:
    from elmo_engine.analysis.language_model.report import VIEW, compute_report_part
    from elmo_engine.errors import CheckpointError
    from elmo_engine.model.softmax import load_softmax

    state = (views or {}).get(VIEW)
    if not isinstance(state, dict):
        return
    try:
        softmax = load_softmax(Path(emb.model.info.weights_path).parent,
                               output_dim=emb.opts.output_dim)
    except CheckpointError:
        softmax = None                     # the part says so; the reach needs no softmax
    part = compute_report_part(emb, softmax, state, tokens, figure_dir, formats)
    spec.tables += part.tables
    spec.figures += part.figures
    spec.notes += part.notes


def report_spec(data, tokens, acts, model: Optional[dict], source: str, word: Optional[str] = None,
                notes: Sequence[str] = (), figure_dir: Optional[Path] = None,
                formats: Sequence[str] = F.FORMATS, contexts: bool = True) -> ReportSpec:
    """The report of a workspace's state (Qt-free; the app adds its own figures).

    Parameters
    ----------
    data : a :class:`~elmo_engine.io.workspace_file.WorkspaceData`
    tokens, acts : the tokens and ``(L+1, n, 2P)`` activations of ``data.sentences``
    model : ``CheckpointInfo.describe()`` of the model used, or None
    source : where the workspace came from (a path, or "ELMo Explorer session")
    word : the word to compare (default: the selected token's)
    figure_dir : write the figures here (:mod:`elmo_engine.io.figures`, in ``formats``; None: tables
        only)
    contexts : compare the word here (False: the caller adds the contexts view's own tables
        and figures, as the app does)
    """
    notes = list(notes)
    if word is None and data.selection is not None:
        s, t = data.selection["sentence"], data.selection["token"]
        if s < len(tokens) and t < len(tokens[s]):
            word = tokens[s][t]
            if data.selection.get("word") and data.selection["word"] != word:
                notes.append(f"The saved selection was '{data.selection['word']}'; the token at "
                             f"that place is now '{word}' (the tokenizer changed?).")
    info = {}
    if model is not None:
        info = {k: model[k] for k in ("name", "format", "checksum", "options_path", "weights_path")}
        info |= {"options": model["options"], "parameters": model["parameter_counts"].get("total")}
    spec = ReportSpec(
        title=f"ELMo Explorer report: {Path(source).name or source}",
        model=info or {"model": "none loaded"},
        data={"workspace": source} | ({"saved": data.saved_at} if data.saved_at else {})
        | {"sentences": len(tokens), "tokens": int(sum(len(t) for t in tokens))},
        parameters={"selected word": word or "(none)"} | _view_parameters(data.views),
        notes=notes + ([data.notes] if data.notes else []))
    if contexts and word and acts and all(a is not None for a in acts):
        _add_contexts(spec, tokens, acts, word, data.views.get("contexts", {}), figure_dir,
                      formats)
    if data.probe_runs:
        _add_probes(spec, data.probe_runs, source, figure_dir, formats)
    return spec


def _view_parameters(views: dict) -> dict:
    """The views' settings that read as parameters (numbers, words, switches, short lists of
    numbers), one row each: ``"projection: colour by"``; groups and saved selections are left
    to the tables."""
    out = {}
    for view, state in (views or {}).items():
        if not isinstance(state, dict):
            continue
        for key, v in state.items():
            if key in ("version", "groups", "selected") or v is None:
                continue
            if isinstance(v, dict):
                v = ", ".join(f"{k} {x}" for k, x in v.items()
                              if isinstance(x, (int, float, str, bool)))
            elif isinstance(v, list):
                if not all(isinstance(x, (int, float)) for x in v) or len(v) > 12:
                    continue
                v = ", ".join(f"{x:.3g}" for x in v)
            if v == "":
                continue
            out[f"{view}: {key.replace('_', ' ')}"] = v
    return out


def _state_groups(state: dict, word: str, tokens) -> dict:
    """The group labels a saved contexts view holds for ``word``: ``{(s, t): group}``."""
    items = (state.get("groups") or {}).get(word) if isinstance(state.get("groups"), dict) else None
    out = {}
    for it in items if isinstance(items, list) else []:
        if not isinstance(it, dict):
            continue
        s, t, g = it.get("sentence"), it.get("token"), it.get("group")
        if (isinstance(s, int) and isinstance(t, int) and isinstance(g, str) and g.strip()
                and 0 <= s < len(tokens) and 0 <= t < len(tokens[s])):
            out[(s, t)] = g.strip()
    return out


def _num(v) -> Optional[float]:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else round(float(v), 6)


def _add_contexts(spec: ReportSpec, tokens, acts, word: str, state: dict,
                  figure_dir: Optional[Path], formats: Sequence[str]) -> None:
    n_layers = acts[0].shape[0] if acts else 0
    weights = state.get("weights")
    if not (isinstance(weights, list) and len(weights) == n_layers
            and all(isinstance(w, (int, float)) and w >= 0 for w in weights)):
        weights = None
    direction = str(state["direction"]) if state.get("direction") in cmp.DIRECTIONS else "both"
    corrected = state.get("corrected") is True
    layer_norm = state.get("layer_norm") is not False
    groups = _state_groups(state, word, tokens)
    comp, _vectors, total = cmp.compare_word(tokens, acts, word, weights, direction, corrected,
                                            groups, layer_norm=layer_norm)
    if comp is None:
        spec.notes.append(f"'{word}' does not occur in the sentences: no similarity tables.")
        return
    assert comp.test is not None                     # compare_word always tests
    sizes = {g: comp.groups.count(g) for g in comp.groups if g}
    spec.parameters |= {
        "contexts: occurrences compared": f"{len(comp.occurrences)} of {total}",
        "contexts: groups": ", ".join(f"{g} ({n})" for g, n in sizes.items()) or "(none)",
        "contexts: permutation test": comp.test.describe(),
        "contexts: weights": ", ".join(f"{w:.2f}" for w in comp.weights),   # as used
        "contexts: layer norm": comp.layer_norm}
    spec.tables.append(ReportTable(
        "contexts_summary", f"'{word}' across contexts: similarity per layer",
        [{"view": name, "self-similarity": _num(comp.self_sim[k]),
          "within groups": _num(comp.within[k]), "between groups": _num(comp.between[k]),
          "within − between": _num(comp.within[k] - comp.between[k]),
          "p (permutation)": _num(comp.p_value[k])}
         for k, name in enumerate(comp.names)],
        caption="Self-similarity: mean cosine between the word's occurrences (all pairs i ≠ j), "
                "per layer and for the scalar mix (Ethayarajh 2019). p: "
                + comp.test.describe() + "."))
    spec.tables.append(ReportTable(
        "contexts_occurrences", f"Occurrences of '{word}', ordered by group",
        [{"#": i + 1, "group": comp.groups[i], "sentence": s + 1, "token": t + 1,
          "context": comp.labels[i]} for i, (s, t) in enumerate(comp.occurrences)]))
    show = len(comp.occurrences) <= MAX_SHOWN_OCCURRENCES
    for k, name in enumerate(comp.names):
        heads = [f"{i + 1}" for i in range(len(comp.occurrences))]
        rows = [{"occurrence": f"{i + 1}: {comp.labels[i]}",
                 **{h: round(float(comp.matrices[k, i, j]), 4) for j, h in enumerate(heads)}}
                for i in range(len(comp.occurrences))]
        spec.tables.append(ReportTable(f"contexts_similarity_{name.replace(' ', '')}",
                                       f"Cosine similarity, {name}", rows,
                                       ["occurrence", *heads], show=show))
    if figure_dir is None:
        return
    from elmo_engine.io.figures.contexts import contexts_heatmaps, contexts_summary

    for stem, fig, caption in (
            ("contexts_heatmaps", contexts_heatmaps(comp),
             f"Cosine similarity of the occurrences of '{word}', per layer and for the mix"),
            ("contexts_summary", contexts_summary(comp),
             f"'{word}': self-, within- and between-group similarity per view")):
        spec.figures += [ReportFigure(p, caption)
                         for p in F.save(fig, figure_dir / stem, list(formats))]


def _add_probes(spec: ReportSpec, runs: List[dict], ws_path, figure_dir: Optional[Path],
                formats: Sequence[str]) -> None:
    results = []
    for i, d in enumerate(runs):
        try:
            results.append(ProbeResult.from_dict(d))
        except (KeyError, TypeError, ValueError) as e:
            raise InputError(f"key 'probe_runs[{i}]' is not a probe result ({type(e).__name__}: "
                             f"{e})", path=ws_path) from None
    rows = [dict(zip(RESULT_COLUMNS, r)) for r in results_rows(results)]
    spec.tables.append(ReportTable("probe_results", "Probe results", rows, list(RESULT_COLUMNS),
                                   caption="One row per layer and one for the scalar mix; scores "
                                           "are fractions in [0, 1]."))
    if figure_dir is None:
        return
    from elmo_engine.io.figures.probes import probe_figure

    spec.figures += [ReportFigure(p, "Probe runs: scalar-mix layer weights and test score per "
                                     "layer (mean ± sd over seeds; dashed: control task; dotted: "
                                     "baseline)")
                     for p in F.save(probe_figure(results), figure_dir / "probe_results",
                                     list(formats))]
