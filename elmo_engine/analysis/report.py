"""The report of a workspace's analysis: its tables and figures, gathered from the engine.

One code path for every report: :func:`build_report` turns a workspace's state (sentences,
selection, view parameters, probe runs, layers results) into a
:class:`~elmo_engine.io.report.ReportSpec`, and :func:`elmo_engine.io.report.write_report` writes
the folder. The app's *Export report…*, ``elmo-explorer export report`` and ``elmo-explorer
report`` all call it, so the same workspace gives the same files (same figures, same names,
same tables):

* the word the workspace names (the explicit ``word``, else the selected token's, else the
  contexts view's word) compared across its occurrences layer by layer
  (:mod:`elmo_engine.analysis.contexts.compare`: summary, occurrences and similarity tables, the
  heatmaps and the summary figure, groups kept);
* that word's nearest neighbours per layer, as the contexts view and ``contexts
  --neighbours-csv`` list them (:func:`_add_neighbours`: the same index, query and rows);
* the workspace's tokens projected to 2-D, one panel per layer and the mix, the word's
  occurrences drawn above the rest (:func:`_add_projection`: seeded UMAP as the projection view
  draws it when the workspace holds that view and umap is installed, else PCA);
* the stored probe results (a table, the scores and the scalar-mix weights);
* the stored layers results (``layers --json``: contextuality table and figure, CKA heatmap) and
  their MDL probes (:func:`_add_mdl`: a table and the codelength / compression bars, also the
  layers view's own MDL runs);
* the language-model view's sentence (:mod:`elmo_engine.analysis.language_model.report`).

Every figure is drawn by :mod:`elmo_engine.io.figures` at the :class:`FigureStyle` asked for,
with a caption that names the model, the data and the numbers that matter. A workspace that
names nothing to report raises :class:`InputError` saying what is missing (never an empty
report).
"""
from __future__ import annotations

import math

import numpy as np
from pathlib import Path
from typing import List, Optional, Sequence

from elmo_engine.analysis.contexts import compare as cmp
from elmo_engine.analysis.probes.experiment import ProbeResult
from elmo_engine.analysis.probes.tables import RESULT_COLUMNS, results_rows
from elmo_engine.errors import InputError
from elmo_engine.io import figures as F
from elmo_engine.io.figures import FigureStyle
from elmo_engine.io.report import ReportFigure, ReportSpec, ReportTable
from elmo_engine.model.tokenize import MAX_SENTENCE_TOKENS, tokenize

#: at most this many occurrences get a per-layer similarity table shown on the report pages
MAX_SHOWN_OCCURRENCES = 12
#: the layers view's name in a workspace file and its state's version (``views["layers"]``)
LAYERS_VIEW = "layers"
LAYERS_VIEW_VERSION = 1


def tokenize_sentences(sentences: Sequence[str]) -> List[List[str]]:
    """The tokens of a workspace's sentences, as the app tokenizes them."""
    return [list(tokenize(s, MAX_SENTENCE_TOKENS)[:MAX_SENTENCE_TOKENS]) for s in sentences]


def named_word(data, tokens, word: Optional[str] = None, notes: Optional[List[str]] = None
               ) -> Optional[str]:
    """The word a workspace's report compares: ``word`` if given, else the selected token's,
    else the contexts view's word (a workspace saved before anything was selected)."""
    if word:
        return word
    if data.selection is not None:
        s, t = data.selection.get("sentence"), data.selection.get("token")
        if isinstance(s, int) and isinstance(t, int) and s < len(tokens) and t < len(tokens[s]):
            found = tokens[s][t]
            saved = data.selection.get("word")
            if saved and saved != found and notes is not None:
                notes.append(f"The saved selection was '{saved}'; the token at that place is "
                             f"now '{found}' (the tokenizer changed?).")
            return found
    state = (data.views or {}).get("contexts")
    named = state.get("word") if isinstance(state, dict) else None
    return named.strip() if isinstance(named, str) and named.strip() else None


def layers_result(data) -> Optional[dict]:
    """The ``layers --json`` document a workspace holds (``views["layers"]["result"]``)."""
    state = (data.views or {}).get(LAYERS_VIEW)
    res = state.get("result") if isinstance(state, dict) else None
    ok = (isinstance(res, dict) and isinstance(res.get("contextuality"), dict)
          and isinstance(res["contextuality"].get("layers"), list))
    return res if ok else None


def _valid_code(c) -> bool:
    """A codelength entry of an ``mdl`` object: a name and finite numbers."""
    return (isinstance(c, dict) and isinstance(c.get("name"), str) and all(
        isinstance(c.get(key), (int, float)) and not isinstance(c.get(key), bool)
        and math.isfinite(c[key]) for key in ("online_codelength_bits", "compression")))


def mdl_runs(data) -> List[dict]:
    """The MDL probe results a workspace holds, each an ``mdl`` object of ``layers --json``:
    the layers result's (``views["layers"]["result"]["mdl"]``), then the layers view's own runs
    (``views["layers"]["mdl"]``, task → object); malformed ones and repeats left out."""
    state = (data.views or {}).get(LAYERS_VIEW)
    state = state if isinstance(state, dict) else {}
    res = state.get("result")
    found = [res.get("mdl") if isinstance(res, dict) else None]
    if isinstance(state.get("mdl"), dict):
        found += [dict(m, task=m.get("task", task)) if isinstance(m, dict) else m
                  for task, m in state["mdl"].items()]
    out: List[dict] = []
    for m in found:
        if (isinstance(m, dict) and isinstance(m.get("layers"), list) and m["layers"]
                and all(_valid_code(c) for c in m["layers"])
                and (m.get("mix") is None or _valid_code(m["mix"])) and m not in out):
            out.append(m)
    return out


def build_report(data, source: str, emb, figure_dir: Optional[Path],
                 style: FigureStyle = FigureStyle(), word: Optional[str] = None,
                 notes: Sequence[str] = (), tokens=None, acts=None) -> ReportSpec:
    """The report of a workspace (a :class:`~elmo_engine.io.workspace_file.WorkspaceData`).

    ``emb``: the embedder of the model (its tokens and ``acts`` are computed here unless
    given: the app passes what it has already embedded, the same numbers); ``source``: where
    the workspace came from (its path); ``figure_dir``: where the figures go (None: tables
    only).

    Raises InputError: the workspace names no word and holds no results (nothing to report),
    or the word it names does not occur in its sentences.
    """
    notes = list(notes)
    if tokens is None:
        tokens = tokenize_sentences(data.sentences)
    word = named_word(data, tokens, word, notes)
    layers = layers_result(data)
    has_mdl = bool(mdl_runs(data))
    lm = (data.views or {}).get("language-model")
    lm_sentence = lm.get("sentence") if isinstance(lm, dict) else None
    has_lm = isinstance(lm_sentence, int) and 0 <= lm_sentence < len(tokens) and emb is not None
    if not word and not data.probe_runs and layers is None and not has_mdl and not has_lm:
        raise InputError("nothing to report: the workspace selects no word, its contexts view "
                         "names none and it holds no probe, layers or language-model results "
                         "(pass --word WORD)", path=source)
    if word and not any(word in t for t in tokens):
        raise InputError(f"'{word}' does not occur in the workspace's {len(tokens)} sentences",
                         path=source)
    if acts is None or len(acts) != len(tokens) or any(a is None for a in acts):
        acts = emb.embed(tokens) if tokens else []
    model = emb.model.info.describe() if emb is not None else None
    spec = report_spec(data, tokens, acts, model, source, word, notes, figure_dir, style, emb)
    if emb is not None:
        _add_language_model(spec, emb, data.views, tokens, figure_dir, style)
    return spec


def export_report(data, source: str, emb, folder, style: FigureStyle = FigureStyle(),
                  word: Optional[str] = None, notes: Sequence[str] = (), overwrite: bool = False,
                  tokens=None, acts=None, state=None):
    """Build the report (:func:`build_report`) and write its folder
    (:func:`~elmo_engine.io.report.write_report`): the one path of the app's *Export report…*,
    ``export report`` and ``report``. Returns ``(spec, files written)``."""
    import shutil
    import tempfile

    from elmo_engine.io.report import write_report

    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.figures-", dir=folder.parent))
    try:
        spec = build_report(data, source, emb, tmp, style, word, notes, tokens, acts)
        files = write_report(folder, spec, overwrite=overwrite, state=state)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return spec, files


# ---- the language model view (issue 27): the same part the app's view reports ---------------
def _add_language_model(spec: ReportSpec, emb, views: dict, tokens, figure_dir: Optional[Path],
                        style: FigureStyle) -> None:
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
    part = compute_report_part(emb, softmax, state, tokens, figure_dir, style.formats, style)
    spec.tables += part.tables
    spec.figures += part.figures
    spec.notes += part.notes


def model_name(model: Optional[dict]) -> str:
    """A model's name for captions ("the model" when unknown)."""
    if not model:
        return "no model"
    name = model.get("name") or Path(str(model.get("weights_path") or "model")).parent.name
    return str(name)


def report_spec(data, tokens, acts, model: Optional[dict], source: str, word: Optional[str],
                notes: Sequence[str] = (), figure_dir: Optional[Path] = None,
                style: FigureStyle = FigureStyle(), emb=None) -> ReportSpec:
    """The report's tables and figures from tokens and activations already computed (see
    :func:`build_report`, which calls it). ``emb``: the embedder the neighbour index is built
    with (None: no neighbour table)."""
    notes = list(notes)
    info = {}
    if model is not None:
        info = {k: model[k] for k in ("name", "format", "checksum", "options_path", "weights_path")}
        info |= {"options": model["options"], "parameters": model["parameter_counts"].get("total")}
    spec = ReportSpec(
        title=f"ELMo Explorer report: {Path(source).name or source}",
        model=info or {"model": "none loaded"},
        data={"workspace": source} | ({"saved": data.saved_at} if data.saved_at else {})
        | {"sentences": len(tokens), "tokens": int(sum(len(t) for t in tokens))},
        parameters={"selected word": word or "(none)"} | _view_parameters(data.views)
        | {"figures": style.describe() + ", " + ", ".join(style.formats)},
        notes=notes + ([data.notes] if data.notes else []))
    where = f"{model_name(model)}, {len(tokens)} sentences"
    views = data.views or {}
    embedded = bool(acts) and all(a is not None for a in acts)
    if word and embedded:
        comp = _add_contexts(spec, tokens, acts, word, views.get("contexts", {}), figure_dir,
                             style, where)
        if emb is not None:
            _add_neighbours(spec, emb, tokens, acts, comp, views.get("contexts"),
                            data.selection, source)
    if embedded:
        _add_projection(spec, tokens, acts, word, views.get("projection"), figure_dir, style,
                        where)
    if data.probe_runs:
        _add_probes(spec, data.probe_runs, source, figure_dir, style, model_name(model))
    layers = layers_result(data)
    if layers is not None:
        _add_layers(spec, layers, figure_dir, style)
    runs = mdl_runs(data)
    if runs:
        _add_mdl(spec, runs, layers, figure_dir, style, model_name(model))
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


def safe_name(text: str) -> str:
    """``text`` as part of a file name (letters, digits, - and _; at most 40 characters)."""
    keep = "".join(c if c.isalnum() or c in "-_" else "_" for c in text).strip("_")
    return keep[:40] or "word"


def _save(spec: ReportSpec, fig, figure_dir: Path, stem: str, caption: str,
          style: FigureStyle) -> None:
    spec.figures += [ReportFigure(p, caption)
                     for p in F.save(fig, figure_dir / stem, list(style.formats), style=style)]


def _add_contexts(spec: ReportSpec, tokens, acts, word: str, state: dict,
                  figure_dir: Optional[Path], style: FigureStyle, where: str) -> cmp.Comparison:
    """The word across its contexts; returns the comparison (its occurrences, ordered by
    group, are what the neighbour table queries)."""
    n_layers = acts[0].shape[0] if acts else 0
    weights = state.get("weights") if isinstance(state, dict) else None
    state = state if isinstance(state, dict) else {}
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
        raise InputError(f"'{word}' does not occur in the sentences")
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
        return comp
    from elmo_engine.io.figures.contexts import contexts_heatmaps, contexts_summary

    n = len(comp.occurrences)
    grouped = ", ".join(f"{g} ({c})" for g, c in sizes.items())
    mix = "mix weights " + ", ".join(f"{w:.2f}" for w in comp.weights)
    if comp.direction != "both":
        mix += f"; {comp.direction} halves"
    if comp.corrected:
        mix += "; anisotropy-corrected"
    if sizes:
        gaps = [(comp.within[k] - comp.between[k], comp.p_value[k], name)
                for k, name in enumerate(comp.names) if not math.isnan(comp.within[k])]
        numbers = "within − between: " + "; ".join(
            f"{name} {d:.3f} (p = {p:.3f})" for d, p, name in gaps) + f" ({comp.test.describe()})"
    else:
        numbers = "self-similarity: " + "; ".join(
            f"{name} {comp.self_sim[k]:.3f}" for k, name in enumerate(comp.names))
    base = safe_name(word)
    _save(spec, contexts_heatmaps(comp), figure_dir, f"contexts_{base}_heatmaps",
          f"Cosine similarity between the {n} occurrences of '{word}' ({where}; "
          + (f"groups {grouped}; " if grouped else "") + f"{mix}), per layer and for the "
          f"scalar mix, rows and columns ordered by group. {numbers}.", style)
    _save(spec, contexts_summary(comp), figure_dir, f"contexts_{base}_summary",
          f"'{word}' ({where}): mean cosine of its {n} occurrences per view — self-similarity"
          + (", within and between the groups " + grouped if grouped else "")
          + f"; bars from 0. {numbers}.", style)
    return comp


def _add_probes(spec: ReportSpec, runs: List[dict], ws_path, figure_dir: Optional[Path],
                style: FigureStyle, model: str) -> None:
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

    tasks = [r.name for r in results]
    _save(spec, probe_figure(results), figure_dir, "probe_results",
          f"Probes on {model} ({len(results)} run{'s' if len(results) != 1 else ''}: "
          + ", ".join(tasks) + "): scalar-mix layer weights (top, bars from 0) and test score "
          "per layer and for the mix (bottom), mean ± sd over seeds; dashed: control task; "
          "dotted: baseline. " + _best_scores(results) + ".", style)


def _best_scores(results) -> str:
    """Each run's best layer and the mix: "POS: best layer 1 (0.912), mix 0.915"."""
    out = []
    for r in results:
        scored = [(lay.test, lay.layer) for lay in r.layers
                  if lay.test is not None and not math.isnan(lay.test)]
        if scored:
            v, k = max(scored)
            mix = "" if r.mix.test is None else f", mix {r.mix.test:.3f}"
            out.append(f"{r.name}: best layer {k} ({v:.3f}){mix}")
    return "; ".join(out) or "scores in the table"


def _add_layers(spec: ReportSpec, doc: dict, figure_dir: Optional[Path],
                style: FigureStyle) -> None:
    from elmo_engine.io.figures.layers import MEASURES, cka_figure, contextuality_figure

    ctx = doc["contextuality"]
    rows = []
    for e in ctx["layers"]:
        for d, vals in (e.get("directions") or {}).items():
            rows.append({"layer": e.get("layer"), "direction": d,
                         **{f"{name}": _num((vals.get(key) or {}).get("value"))
                            for key, name in MEASURES},
                         **{f"{name} baseline": _num((vals.get(key) or {}).get("baseline"))
                            for key, name in MEASURES}})
    corpus = doc.get("corpus") or {}
    model = (doc.get("model") or {}).get("name") or "the model"
    where = (f"{model}, {corpus.get('sentences', '?')} sentences / {corpus.get('tokens', '?')} "
             f"tokens of {Path(str(corpus.get('path', 'the corpus'))).name}")
    spec.tables.append(ReportTable(
        "layers_contextuality", "How contextual each layer is", rows,
        caption=f"Ethayarajh (2019)'s measures per layer and direction ({where}), each beside "
                "its anisotropy baseline."))
    if figure_dir is None:
        return
    both = [(e.get("layer"), ((e.get("directions") or {}).get("both") or {})
             .get("self_similarity", {}).get("value")) for e in ctx["layers"]]
    both = [(k, v) for k, v in both if isinstance(v, (int, float))]
    numbers = ("self-similarity " + ", ".join(f"layer {k} {v:.3f}" for k, v in both)) if both \
        else "values in the table"
    _save(spec, contextuality_figure(ctx), figure_dir, "layers_contextuality",
          f"Contextuality per layer ({where}): self-similarity, intra-sentence similarity and "
          f"maximum explainable variance, dashed: anisotropy baseline; {numbers}.", style)
    cka = doc.get("cka")
    if isinstance(cka, dict) and isinstance(cka.get("matrix"), list) and cka["matrix"]:
        _save(spec, cka_figure(cka, "Linear CKA between layers"), figure_dir, "layers_cka",
              f"Linear CKA between the layers ({where}); 1 = the same representation up to "
              "rotation and scale.", style)


# ---- the contexts view's nearest neighbours (issue 29) ---------------------------------------
#: neighbours per layer when the saved contexts view names no ``k`` (the view's default)
NEIGHBOURS_K = 8
MAX_NEIGHBOURS_K = 100


def _occurrence(ref, occurrences) -> Optional[tuple]:
    """``ref`` (a saved ``{"sentence", "token"}``) when it is one of ``occurrences``."""
    if not isinstance(ref, dict):
        return None
    s, t = ref.get("sentence"), ref.get("token")
    if not (isinstance(s, int) and isinstance(t, int)) or isinstance(s, bool) or isinstance(t, bool):
        return None
    return (s, t) if (s, t) in occurrences else None


def _add_neighbours(spec: ReportSpec, emb, tokens, acts, comp: cmp.Comparison, state,
                    selection, source: str) -> None:
    """The nearest neighbours of the compared word per layer, as the contexts view shows them
    and ``contexts --neighbours-csv`` writes them: the same index (the sentences, then the
    view's reference text; layer 0's known words from the checkpoint's vocabulary), the same
    query (the view's selected occurrence, else the workspace's selection, else the first
    occurrence in group order), the same rows (:meth:`NeighbourTable.csv_rows`)."""
    from elmo_engine.analysis.contexts.neighbour_corpus import (build_index, read_corpus,
                                                                read_vocabulary, vocabulary_file)
    from elmo_engine.analysis.contexts.neighbours import NEIGHBOUR_COLUMNS, neighbour_table

    state = state if isinstance(state, dict) else {}
    k = state.get("k")
    if not (isinstance(k, int) and not isinstance(k, bool) and 1 <= k <= MAX_NEIGHBOURS_K):
        k = NEIGHBOURS_K
    direction = str(state["direction"]) if state.get("direction") in cmp.DIRECTIONS else "both"
    reference: List[List[str]] = []
    ref_name = ""
    ref = state.get("reference_file")
    if isinstance(ref, str) and ref.strip():
        path = Path(ref)
        path = path if path.is_absolute() else Path(source).parent / path
        try:
            reference, ref_name = read_corpus(path), path.name
        except (InputError, OSError) as e:
            spec.notes.append(f"The contexts view's reference text was left out of the "
                              f"neighbour corpus: {e}")
    vocab = vocabulary_file(emb.model.info.options_path)
    words = read_vocabulary(vocab) if vocab is not None else []
    index = build_index(emb, [list(t) for t in tokens] + reference, words)
    query = (_occurrence(state.get("selected"), comp.occurrences)
             or _occurrence(selection, comp.occurrences) or comp.occurrences[0])
    s, t = query
    table = neighbour_table(index, acts[s][:, t], comp.word, k, direction, [query])
    rows = [dict(zip(NEIGHBOUR_COLUMNS, r)) for r in table.csv_rows(index)]
    corpus = f"the {len(tokens)} sentences" + (f" and {ref_name}" if ref_name else "")
    spec.parameters |= {"contexts: neighbours": f"k = {k} per layer, {direction} halves, "
                                                f"the occurrence in sentence {s + 1} "
                                                f"(token {t + 1})"}
    firsts = "; ".join(f"{name}: {index.tokens[nbs[0].sentence][nbs[0].token]} "
                       f"({nbs[0].score:.3f})" for name, nbs in table.layers if nbs)
    spec.tables.append(ReportTable(
        "contexts_neighbours", f"Nearest neighbours of '{comp.word}' per layer", rows,
        list(NEIGHBOUR_COLUMNS),
        caption=f"The {k} tokens nearest (cosine, {direction} halves) to the occurrence of "
                f"'{comp.word}' in sentence {s + 1} (token {t + 1}) per contextual layer, among "
                f"the {index.n_tokens:,} tokens of {corpus} (itself left out); layer 0: the "
                f"nearest of {len(index.words or [])} known words by their character-CNN "
                f"vectors. Nearest per layer: {firsts or 'none'}. sentence and token are "
                "0-based places in that corpus (the workspace's sentences first), as "
                "contexts --neighbours-csv writes them."))


# ---- the projection view's per-layer maps (issue 29) -----------------------------------------
#: the most tokens the report projects (a fixed uniform sample, seed 0, beyond it)
PROJECTION_MAX_POINTS = 5000
#: UMAP's seed when the saved projection view names none (or asks for a random one)
PROJECTION_SEED = 42
#: the colour of the tokens that are not the compared word
OTHER_TOKENS_COLOR = "#56B4E9"


def _projection_params(state):
    """How the report projects: ``(method, UmapParams)``. Seeded UMAP with the saved view's
    settings when the workspace holds a projection view (it draws UMAP) and umap-learn is
    installed; else PCA (deterministic, no compile)."""
    import importlib.util

    from elmo_engine.analysis.projection import UmapParams

    if not isinstance(state, dict) or importlib.util.find_spec("umap") is None:
        return "pca", UmapParams()
    u = state.get("umap") if isinstance(state.get("umap"), dict) else {}

    def whole(v, lo, hi):
        return v if isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi else None

    seed = whole(u.get("seed"), 0, 2 ** 31 - 1)
    n_neighbors = whole(u.get("n_neighbors"), 2, 200) or 15
    md = u.get("min_dist")
    min_dist = float(md) if isinstance(md, (int, float)) and not isinstance(md, bool) \
        and 0.0 <= md <= 1.0 else 0.1
    epochs = whole(u.get("epochs"), 0, 5000)
    return "umap", UmapParams(n_neighbors=n_neighbors, min_dist=min_dist,
                              random_state=PROJECTION_SEED if seed is None else seed,
                              n_epochs=max(10, epochs) if epochs else None)


def _projection_layers(state, n_layers: int):
    """Layers 0 … L and the scalar mix with the saved view's weights (equal by default)."""
    from elmo_engine.analysis.projection import LayerSpec

    layers = [LayerSpec.single(k) for k in range(n_layers)]
    if n_layers > 1:
        state = state if isinstance(state, dict) else {}
        w = state.get("mix_weights")
        ok = (isinstance(w, list) and len(w) == n_layers and sum(w) > 0 and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and x >= 0 for x in w))
        layers.append(LayerSpec.mix(w if ok else [1.0] * n_layers,
                                    state.get("layer_norm") is True))
    return layers


def projection_figure(tokens, acts, word: Optional[str], state=None):
    """The report's projection grid: every token of ``tokens`` (a sample of
    :data:`PROJECTION_MAX_POINTS` beyond it) projected to 2-D, one panel per layer and the mix
    (the projection view's maps, :mod:`elmo_engine.analysis.projection`); the occurrences of
    ``word`` drawn above the rest and named in the legend; a map whose points are all the same
    is a note. ``state``: the saved projection view (its UMAP settings and mix weights).

    Returns ``(figure, points, projections, how)``: ``how`` says in words which method drew
    the maps (for the caption)."""
    from elmo_engine.analysis.projection import Projector, all_tokens, collapsed_note
    from elmo_engine.io.figures.projection import projection_grid

    points = all_tokens(tokens, f"{len(tokens)} sentences").sample(PROJECTION_MAX_POINTS, seed=0)
    method, params = _projection_params(state)
    layers = _projection_layers(state, acts[0].shape[0])
    projections = Projector().run(acts, points, layers, method, params, pca_fallback=True)
    mine = np.array([w == word for w in points.words], bool)
    n_mine = int(mine.sum())
    colors = [F.USER_COLOR if m else OTHER_TOKENS_COLOR for m in mine]
    panels = []
    for p in projections:
        if p.method == "pca":
            ex = p.explained or (0.0, 0.0)
            title = f"PCA ({100 * ex[0]:.0f} % + {100 * ex[1]:.0f} % of variance)"
        else:
            title = "UMAP"
        panels.append({"title": f"{p.layer.name}: {title}", "xy": p.coords, "colors": colors,
                       "labels": list(points.words), "highlight": mine if n_mine else None,
                       "note": collapsed_note(p, points.words)})
    legend = [(f"other tokens ({len(points) - n_mine:,})" if n_mine else
               f"tokens ({len(points):,})", OTHER_TOKENS_COLOR)]
    fig = projection_grid(panels, legend, user_label=f"'{word}' ({n_mine})")
    used = sorted({p.method for p in projections})
    if "umap" in used:
        how = (f"UMAP (seed {params.random_state}, {params.n_neighbors} neighbours, min dist "
               f"{params.min_dist:.2f}, cosine kNN on {params.pca_dims} PCA dimensions)")
        if "pca" in used:
            how += "; PCA where there were too few distinct points for UMAP"
    else:
        how = "PCA (the first two principal components; the share of variance in each title)"
    return fig, points, projections, how


def _add_projection(spec: ReportSpec, tokens, acts, word: Optional[str], state,
                    figure_dir: Optional[Path], style: FigureStyle, where: str) -> None:
    """The projection grid (:func:`projection_figure`) as a figure of the report."""
    n = sum(len(t) for t in tokens)
    if figure_dir is None or n < 2:
        return
    fig, points, projections, how = projection_figure(tokens, acts, word, state)
    n_mine = sum(w == word for w in points.words)
    mark = (f" The {n_mine} occurrences of '{word}' are ringed and drawn above the other "
            "tokens." if n_mine else "")
    spec.parameters |= {"projection (report)": how.split(" (")[0] + f", {len(points):,} tokens"}
    _save(spec, fig, figure_dir, "projection_" + "_".join(sorted({p.method for p in projections})),
          f"The {len(points):,} tokens of the workspace's sentences ({where}"
          + (f"; a fixed sample of the {n:,}" if len(points) < n else "")
          + f") projected to 2-D per layer and for the scalar mix by {how}; equal axes, "
          f"axis units arbitrary.{mark} A panel whose tokens fall on a few points is a note.",
          style)


# ---- MDL probes of the layers result (issue 29) ----------------------------------------------
def _count(v) -> str:
    return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else "?"


def _add_mdl(spec: ReportSpec, runs: List[dict], doc: Optional[dict],
             figure_dir: Optional[Path], style: FigureStyle, model: str) -> None:
    """The online-code MDL probes (Voita & Titov 2020) the layers result and view hold: a table
    as the layers view lists them and the codelength / compression bars
    (:func:`elmo_engine.io.figures.layers.mdl_figure`)."""
    from elmo_engine.io.figures.layers import mdl_figure

    if doc is not None:
        model = (doc.get("model") or {}).get("name") or model
    rows = []
    for m in runs:
        for c in m["layers"] + ([m["mix"]] if m.get("mix") else []):
            rows.append({"task": str(m.get("task", "")), "layer": c["name"],
                         "online codelength (kbits)": round(c["online_codelength_bits"] / 1000,
                                                            4),
                         "uniform codelength (kbits)": _num(
                             (c.get("uniform_codelength_bits") or math.nan) / 1000),
                         "compression": _num(c["compression"]),
                         "final block accuracy": _num(c.get("final_block_accuracy"))})
    about = "; ".join(
        f"{m.get('task', 'task')}: {_count(m.get('examples'))} labelled tokens, "
        f"{_count(m.get('classes'))} labels"
        + (f", {Path(str(m['source'])).name}" if m.get("source") else "") for m in runs)
    best = "; ".join(
        "{task}: shortest {name} {bits:.2f} kbits (compression {comp:.2f})".format(
            task=m.get("task", "task"), name=b["name"], bits=b["online_codelength_bits"] / 1000,
            comp=b["compression"])
        for m in runs for b in [min(m["layers"] + ([m["mix"]] if m.get("mix") else []),
                                    key=lambda c: c["online_codelength_bits"])])
    spec.tables.append(ReportTable(
        "layers_mdl", "MDL probes: codelength per layer", rows,
        caption=f"Online-code MDL probes (Voita & Titov 2020) on {model} ({about}): the bits "
                "needed to transmit the labels with a probe of each layer and of the scalar "
                "mix; compression = uniform / online codelength; accuracy of the probe on the "
                f"last block. {best}."))
    if figure_dir is None:
        return
    _save(spec, mdl_figure(runs), figure_dir, "layers_mdl",
          f"Online-code MDL probes on {model} ({about}): codelength per layer and for the "
          "scalar mix (left, kbits; shorter: the labels are easier to extract) and compression "
          f"(right, uniform / online codelength), bars from 0. {best}.", style)
