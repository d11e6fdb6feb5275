"""The report of a workspace's analysis: its tables and figures, gathered from the engine.

One code path for every report: :func:`build_report` turns a workspace's state (sentences,
selection, view parameters, probe runs, layers results) into a
:class:`~elmo_engine.io.report.ReportSpec`, and :func:`elmo_engine.io.report.write_report` writes
the folder. The app's *Export report…*, ``elmo-explorer export report`` and ``elmo-explorer
report`` all call it, so the same workspace gives the same files (same figures, same names,
same tables):

* the word the workspace names (the explicit ``word``, else the selected token's, else the
  contexts view's word) compared across its occurrences layer by layer
  (:func:`elmo_engine.analysis.contexts.report.contexts_part`: summary, occurrences and
  similarity tables, the heatmaps and the summary figure, groups kept);
* that word's nearest neighbours per layer, as the contexts view and ``contexts
  --neighbours-csv`` list them (:func:`~elmo_engine.analysis.contexts.report.neighbours_part`:
  the same index, query and rows);
* the workspace's tokens projected to 2-D, one panel per layer and the mix, the word's
  occurrences drawn above the rest
  (:func:`elmo_engine.analysis.projection.report.projection_part`: seeded UMAP as the projection
  view draws it when the workspace holds that view and umap is installed, else PCA);
* the stored probe results (a table, the scores and the scalar-mix weights);
* the stored layers results (``layers --json``: contextuality table and figure, CKA heatmap) and
  their MDL probes (:func:`_add_mdl`: a table and the codelength / compression bars, also the
  layers view's own MDL runs);
* the language-model view's sentence (:mod:`elmo_engine.analysis.language_model.report`);
* the Units view's last ranking (table and top-k curves) and intervention (before / after),
  as the workspace saved them (:mod:`elmo_engine.analysis.units.report`).

Each view's share is a :class:`~elmo_engine.io.report.ReportPart` computed from values by the
view's own report module and added with :meth:`ReportSpec.add`; the probes, layers and MDL
parts are built here. Every figure is drawn by :mod:`elmo_engine.io.figures` at the
:class:`FigureStyle` asked for,
with a caption that names the model, the data and the numbers that matter. A workspace that
names nothing to report raises :class:`InputError` saying what is missing (never an empty
report).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import List, Optional, Sequence

from elmo_engine.analysis.contexts.report import contexts_part, neighbours_part
from elmo_engine.analysis.layers.report import hubness_part
from elmo_engine.analysis.probes.results import ProbeResult
from elmo_engine.analysis.probes.tables import RESULT_COLUMNS, results_rows
from elmo_engine.analysis.projection.report import projection_part
from elmo_engine.atomic import fitting_name
from elmo_engine.errors import InputError
from elmo_engine.io.figures import FigureStyle
from elmo_engine.io.report import ReportSpec, ReportTable, saved_figures, table_number, yes_no
from elmo_engine.model.tokenize import MAX_SENTENCE_TOKENS, sentence_tokens

#: the layers view's name in a workspace file and its state's version (``views["layers"]``)
LAYERS_VIEW = "layers"
LAYERS_VIEW_VERSION = 1


def tokenize_sentences(sentences: Sequence[str], tokenization: str = "tokenize"
                       ) -> List[List[str]]:
    """The tokens of a workspace's sentences, as the app tokenizes them (its ``tokenization``:
    typed text, or ``"whitespace"`` for pretokenized text)."""
    return [list(sentence_tokens(s, tokenization, MAX_SENTENCE_TOKENS)[:MAX_SENTENCE_TOKENS])
            for s in sentences]


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


def layers_result_problem(data) -> Optional[str]:
    """Why the ``layers --json`` document a workspace holds cannot be reported (None: there is
    none, or it is whole): the key at fault (:mod:`elmo_engine.io.layers_result_check`)."""
    from elmo_engine.io.layers_result_check import LayersFormatError, check_layers_document

    state = (data.views or {}).get(LAYERS_VIEW)
    res = state.get("result") if isinstance(state, dict) else None
    if res is None:
        return None
    try:
        check_layers_document(res)
    except LayersFormatError as e:
        return f"the layers view's result: {e}"
    return None


def layers_result(data) -> Optional[dict]:
    """The ``layers --json`` document a workspace holds (``views["layers"]["result"]``); None
    when there is none or it is malformed (:func:`layers_result_problem` says why)."""
    state = (data.views or {}).get(LAYERS_VIEW)
    res = state.get("result") if isinstance(state, dict) else None
    return res if res is not None and layers_result_problem(data) is None else None


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
                 notes: Sequence[str] = (), tokens=None, acts=None,
                 corpus_ann_limit: Optional[int] = None) -> ReportSpec:
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
        tokens = tokenize_sentences(data.sentences, data.tokenization)
    word = named_word(data, tokens, word, notes)
    layers = layers_result(data)
    has_mdl = bool(mdl_runs(data))
    lm = (data.views or {}).get("language-model")
    lm_sentence = lm.get("sentence") if isinstance(lm, dict) else None
    has_lm = isinstance(lm_sentence, int) and 0 <= lm_sentence < len(tokens) and emb is not None
    chars = (data.views or {}).get("characters")
    has_chars = emb is not None and isinstance(chars, dict) and bool(
        str(chars.get("words") or "").split() or str(chars.get("sentence") or "").strip())
    from elmo_engine.analysis.units.report import VIEW as UNITS, saved_results, units_part

    units = (data.views or {}).get(UNITS)
    has_units = isinstance(units, dict) and saved_results(units.get("results")) is not None
    from elmo_engine.index.report import VIEW as CORPUS, corpus_part, saved_query

    corpus = (data.views or {}).get(CORPUS)
    has_corpus = emb is not None and saved_query(corpus) is not None
    if (not word and not data.probe_runs and layers is None and not has_mdl and not has_lm
            and not has_chars and not has_units and not has_corpus):
        raise InputError("nothing to report: the workspace selects no word, its contexts view "
                         "names none and it holds no probe, layers or language-model results "
                         "(pass --word WORD)", path=source)
    if word and not any(word in t for t in tokens):
        raise InputError(f"'{word}' does not occur in the workspace's {len(tokens)} sentences",
                         path=source)
    if acts is None or len(acts) != len(tokens) or any(a is None for a in acts):
        if tokens:
            from elmo_engine.embed.embedder import check_held_activations

            check_held_activations(sum(len(t) for t in tokens), emb.opts,
                                   what="workspace's sentences", path=source)
        acts = emb.embed(tokens) if tokens else []
    model = emb.model.info.describe() if emb is not None else None
    spec = report_spec(data, tokens, acts, model, source, word, notes, figure_dir, style, emb)
    if emb is not None:
        _add_language_model(spec, emb, data.views, tokens, figure_dir, style)
        from elmo_engine.analysis.characters.report import VIEW as CHARACTERS, characters_part

        spec.add(characters_part(emb, (data.views or {}).get(CHARACTERS), figure_dir, style,
                                 model_name(model), data.tokenization))
    spec.add(units_part(units, figure_dir, style, model_name(model),
                        emb.checksum if emb is not None else None))
    if has_corpus:
        spec.add(corpus_part(emb, corpus, figure_dir, style, model_name(model),
                             corpus_ann_limit))
    return spec


def export_report(data, source: str, emb, folder, style: FigureStyle = FigureStyle(),
                  word: Optional[str] = None, notes: Sequence[str] = (), overwrite: bool = False,
                  tokens=None, acts=None, state=None, corpus_ann_limit: Optional[int] = None):
    """Build the report (:func:`build_report`) and write its folder
    (:func:`~elmo_engine.io.report.write_report`): the one path of the app's *Export report…*,
    ``export report`` and ``report``. Returns ``(spec, files written)``."""
    import shutil
    import tempfile

    from elmo_engine.io.report import write_report

    from elmo_engine.io.writing import writing

    folder = Path(folder)
    with writing(folder):           # a folder that takes no files: one error naming the report's
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{fitting_name(folder.name, 20)}.figures-",
                                    dir=folder.parent))
    try:
        spec = build_report(data, source, emb, tmp, style, word, notes, tokens, acts,
                            corpus_ann_limit)
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
    spec.add(compute_report_part(emb, softmax, state, tokens, figure_dir, style.formats, style))


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
        parameters={"selected word": word or "(none)"}
        | ({"precision": emb.precision} if emb is not None else {})
        | _view_parameters(data.views)
        | {"figures": style.describe() + ", " + ", ".join(style.formats)},
        notes=notes + ([data.notes] if data.notes else []))
    where = f"{model_name(model)}, {len(tokens)} sentences"
    views = data.views or {}
    embedded = bool(acts) and all(a is not None for a in acts)
    groups: dict = {}
    if word and embedded:
        part, comp = contexts_part(tokens, acts, word, views.get("contexts", {}), figure_dir,
                                   style, where)
        groups = {tuple(o): g for o, g in zip(comp.occurrences, comp.groups) if g}
        spec.add(part)
        if emb is not None:
            spec.add(neighbours_part(emb, tokens, acts, comp, views.get("contexts"),
                                     data.selection, source))
    if embedded:
        spec.add(projection_part(tokens, acts, word, views.get("projection"), figure_dir, style,
                                 where, groups))
    if data.probe_runs:
        _add_probes(spec, data.probe_runs, source, figure_dir, style, model_name(model))
    layers = layers_result(data)
    if layers is not None:
        _add_layers(spec, layers, figure_dir, style)
    runs = mdl_runs(data)
    if runs:
        _add_mdl(spec, runs, layers, figure_dir, style, model_name(model))
    return spec


#: a view setting longer than this is no parameter for the table (issue 39: a whole JSON in a cell)
MAX_PARAMETER_CHARS = 160


def _view_parameters(views: dict) -> dict:
    """The views' settings that read as parameters (numbers, words, switches, short lists of
    numbers, flat settings), one row each: ``"projection: colour by"``, at most
    :data:`MAX_PARAMETER_CHARS` characters; groups, saved selections and stored results are left
    to the tables."""
    out = {}
    for view, state in (views or {}).items():
        if not isinstance(state, dict):
            continue
        for key, v in state.items():
            if key in ("version", "groups", "selected", "result") or v is None:
                continue                  # (a layers result is the report's layers tables)
            if isinstance(v, dict):
                if not all(isinstance(x, (int, float, str, bool)) for x in v.values()):
                    continue              # a nested document is no parameter
                v = ", ".join(f"{k} {yes_no(x) if isinstance(x, bool) else x}"
                              for k, x in v.items())
            elif isinstance(v, list):
                if not all(isinstance(x, (int, float)) for x in v) or len(v) > 12:
                    continue
                v = ", ".join(f"{x:.3g}" for x in v)
            if v == "" or len(str(v)) > MAX_PARAMETER_CHARS:
                continue
            out[f"{view}: {key.replace('_', ' ')}"] = v
    return out


def _add_probes(spec: ReportSpec, runs: List[dict], ws_path, figure_dir: Optional[Path],
                style: FigureStyle, model: str) -> None:
    results = []
    for i, d in enumerate(runs):
        try:
            results.append(ProbeResult.from_dict(d))
        except (KeyError, TypeError, ValueError) as e:
            raise InputError(f"key 'probe_runs[{i}]' is not a probe result ({type(e).__name__}: "
                             f"{e})", path=ws_path) from None
    # the runs' own model (a run records it): the loaded model may be another, of other layers
    ran_on = list(dict.fromkeys(r.model for r in results if r.model)) or [model]
    other = [m for m in ran_on if m != model]
    said = (f" The runs were made with {', '.join(ran_on)}, not with the loaded model {model}: "
            "their layers are that model's." if other else "")
    rows = [dict(zip(RESULT_COLUMNS, r)) for r in results_rows(results)]
    spec.tables.append(ReportTable("probe_results", "Probe results", rows, list(RESULT_COLUMNS),
                                   caption="One row per layer and one for the scalar mix; scores "
                                           "are fractions in [0, 1]." + said))
    from elmo_engine.analysis.probes.report import usefulness_part

    runs_model = ", ".join(ran_on)
    spec.add(usefulness_part(results, figure_dir, style, runs_model))
    if figure_dir is None:
        return
    from elmo_engine.io.figures.probes import probe_figure

    tasks = [r.name for r in results]
    spec.figures += saved_figures(
        probe_figure(results), figure_dir, "probe_results",
        f"Probes on {runs_model} ({len(results)} run{'s' if len(results) != 1 else ''}: "
        + ", ".join(tasks) + "): scalar-mix layer weights (top, bars from 0) and test score "
        "per layer and for the mix (bottom), mean ± sd over seeds; dashed: control task; "
        "dotted: baseline. " + _best_scores(results) + "." + said, style)


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
    from elmo_engine.io.figures.layers import MEASURES

    ctx = doc["contextuality"]
    rows = []
    for e in ctx["layers"]:
        for d, vals in (e.get("directions") or {}).items():
            rows.append({"layer": e.get("layer"), "direction": d,
                         **{f"{name}": table_number((vals.get(key) or {}).get("value"))
                            for key, name in MEASURES},
                         **{f"{name} baseline":
                            table_number((vals.get(key) or {}).get("baseline"))
                            for key, name in MEASURES}})
    corpus = doc.get("corpus") or {}
    model = (doc.get("model") or {}).get("name") or "the model"
    where = (f"{model}, {corpus.get('sentences', '?')} sentences / {corpus.get('tokens', '?')} "
             f"tokens of {Path(str(corpus.get('path', 'the corpus'))).name}")
    spec.tables.append(ReportTable(
        "layers_contextuality", "How contextual each layer is", rows,
        caption=f"Ethayarajh (2019)'s measures per layer and direction ({where}), each beside "
                "its anisotropy baseline."))
    if figure_dir is not None:
        _layers_figures(spec, doc, figure_dir, style, where)
    spec.add(hubness_part(doc, figure_dir, style, where))


def _layers_figures(spec: ReportSpec, doc: dict, figure_dir: Path, style: FigureStyle,
                    where: str) -> None:
    from elmo_engine.io.figures.layers import contextuality_figure, cka_figure

    ctx = doc["contextuality"]
    both = [(e.get("layer"), ((e.get("directions") or {}).get("both") or {})
             .get("self_similarity", {}).get("value")) for e in ctx["layers"]]
    both = [(k, v) for k, v in both if isinstance(v, (int, float))]
    numbers = ("self-similarity " + ", ".join(f"layer {k} {v:.3f}" for k, v in both)) if both \
        else "values in the table"
    spec.figures += saved_figures(
        contextuality_figure(ctx), figure_dir, "layers_contextuality",
        f"Contextuality per layer ({where}): self-similarity, intra-sentence similarity and "
        f"maximum explainable variance, dashed: anisotropy baseline; {numbers}.", style)
    cka = doc.get("cka")
    if isinstance(cka, dict) and isinstance(cka.get("matrix"), list) and cka["matrix"]:
        spec.figures += saved_figures(
            cka_figure(cka, "Linear CKA between layers"), figure_dir, "layers_cka",
            f"Linear CKA between the layers ({where}); 1 = the same representation up to "
            "rotation and scale.", style)


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
                         "uniform codelength (kbits)": table_number(
                             (c.get("uniform_codelength_bits") or math.nan) / 1000),
                         "compression": table_number(c["compression"]),
                         "final block accuracy": table_number(c.get("final_block_accuracy"))})
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
    spec.figures += saved_figures(
        mdl_figure(runs), figure_dir, "layers_mdl",
        f"Online-code MDL probes on {model} ({about}): codelength per layer and for the "
        "scalar mix (left, kbits; shorter: the labels are easier to extract) and compression "
        f"(right, uniform / online codelength), bars from 0. {best}.", style)
