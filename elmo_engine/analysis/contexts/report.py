"""The contexts view's share of a report (:mod:`elmo_engine.analysis.report` gathers the parts):
the word compared across its occurrences layer by layer (:mod:`.compare`: the summary, the
occurrences and the per-layer similarity tables, the heatmaps and the summary figure, groups
kept) and its nearest neighbours per layer as the contexts view and ``contexts
--neighbours-csv`` list them (:mod:`.neighbours`). Ethayarajh (2019) for self-similarity.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import List, Optional, Tuple

from elmo_engine.analysis.contexts import compare as cmp
from elmo_engine.errors import InputError
from elmo_engine.io.figures import FigureStyle
from elmo_engine.io.report import ReportPart, ReportTable, saved_figures, table_number

#: at most this many occurrences get a per-layer similarity table shown on the report pages
MAX_SHOWN_OCCURRENCES = 12


def state_groups(state: dict, word: str, tokens) -> dict:
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



def safe_name(text: str) -> str:
    """``text`` as part of a file name (letters, digits, - and _; at most 40 characters)."""
    keep = "".join(c if c.isalnum() or c in "-_" else "_" for c in text).strip("_")
    return keep[:40] or "word"


def contexts_part(tokens, acts, word: str, state, figure_dir: Optional[Path], style: FigureStyle,
                  where: str) -> Tuple[ReportPart, cmp.Comparison]:
    """The word across its contexts, and the comparison (its occurrences, ordered by group, are
    what the neighbour table queries). ``state``: the saved contexts view; ``where``: the
    model and the data, for the captions."""
    part = ReportPart()
    n_layers = acts[0].shape[0] if acts else 0
    weights = state.get("weights") if isinstance(state, dict) else None
    state = state if isinstance(state, dict) else {}
    if not (isinstance(weights, list) and len(weights) == n_layers
            and all(isinstance(w, (int, float)) and w >= 0 for w in weights)):
        weights = None
    direction = str(state["direction"]) if state.get("direction") in cmp.DIRECTIONS else "both"
    corrected = state.get("corrected") is True
    layer_norm = state.get("layer_norm") is not False
    groups = state_groups(state, word, tokens)
    comp, _vectors, total = cmp.compare_word(tokens, acts, word, weights, direction, corrected,
                                            groups, layer_norm=layer_norm)
    if comp is None:
        raise InputError(f"'{word}' does not occur in the sentences")
    assert comp.test is not None                     # compare_word always tests
    sizes = {g: comp.groups.count(g) for g in comp.groups if g}
    part.parameters |= {
        "contexts: occurrences compared": f"{len(comp.occurrences)} of {total}",
        "contexts: groups": ", ".join(f"{g} ({n})" for g, n in sizes.items()) or "(none)",
        "contexts: permutation test": comp.test.describe(),
        "contexts: weights": ", ".join(f"{w:.2f}" for w in comp.weights),   # as used
        "contexts: layer norm": comp.layer_norm}
    part.tables.append(ReportTable(
        "contexts_summary", f"'{word}' across contexts: similarity per layer",
        [{"view": name, "self-similarity": table_number(comp.self_sim[k]),
          "within groups": table_number(comp.within[k]),
          "between groups": table_number(comp.between[k]),
          "within − between": table_number(comp.within[k] - comp.between[k]),
          "p (permutation)": table_number(comp.p_value[k])}
         for k, name in enumerate(comp.names)],
        caption="Self-similarity: mean cosine between the word's occurrences (all pairs i ≠ j), "
                "per layer and for the scalar mix (Ethayarajh 2019). p: "
                + comp.test.describe() + "."))
    part.tables.append(ReportTable(
        "contexts_occurrences", f"Occurrences of '{word}', ordered by group",
        [{"#": i + 1, "group": comp.groups[i], "sentence": s + 1, "token": t + 1,
          "context": comp.labels[i]} for i, (s, t) in enumerate(comp.occurrences)]))
    show = len(comp.occurrences) <= MAX_SHOWN_OCCURRENCES
    for k, name in enumerate(comp.names):
        heads = [f"{i + 1}" for i in range(len(comp.occurrences))]
        rows = [{"occurrence": f"{i + 1}: {comp.labels[i]}",
                 **{h: round(float(comp.matrices[k, i, j]), 4) for j, h in enumerate(heads)}}
                for i in range(len(comp.occurrences))]
        part.tables.append(ReportTable(f"contexts_similarity_{name.replace(' ', '')}",
                                       f"Cosine similarity, {name}", rows,
                                       ["occurrence", *heads], show=show))
    if figure_dir is None:
        return part, comp
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
    part.figures += saved_figures(
        contexts_heatmaps(comp), figure_dir, f"contexts_{base}_heatmaps",
        f"Cosine similarity between the {n} occurrences of '{word}' ({where}; "
        + (f"groups {grouped}; " if grouped else "") + f"{mix}), per layer and for the "
        f"scalar mix, rows and columns ordered by group. {numbers}.", style)
    part.figures += saved_figures(
        contexts_summary(comp), figure_dir, f"contexts_{base}_summary",
        f"'{word}' ({where}): mean cosine of its {n} occurrences per view — self-similarity"
        + (", within and between the groups " + grouped if grouped else "")
        + f"; bars from 0. {numbers}.", style)
    return part, comp


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


def neighbours_part(emb, tokens, acts, comp: cmp.Comparison, state, selection,
                    source: str) -> ReportPart:
    """The nearest neighbours of the compared word per layer, as the contexts view shows them
    and ``contexts --neighbours-csv`` writes them: the same index (the sentences, then the
    word's sentences of the bundled reference set unless the view turned it off, then the view's
    reference text, read as the view read it; layer 0's known words from the checkpoint's
    vocabulary), the same
    query (the view's selected occurrence, else the workspace's selection, else the first
    occurrence in group order), the same rows (:meth:`NeighbourTable.csv_rows`)."""
    from elmo_engine.analysis.contexts.neighbour_corpus import (build_index, read_corpus,
                                                                read_vocabulary, vocabulary_file)
    from elmo_engine.analysis.contexts.neighbours import NEIGHBOUR_COLUMNS, neighbour_table

    part = ReportPart()
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
        how = state.get("reference_reading")              # as the view read it
        how = how if isinstance(how, dict) else {}
        try:
            reference = read_corpus(path, how.get("pretokenized") is True,
                                    how.get("split_sentences") is not False).sentences
            ref_name = path.name
        except (InputError, OSError) as e:
            part.notes.append(f"The contexts view's reference text was left out of the "
                              f"neighbour corpus: {e}")
    from elmo_engine.io.datasets.reference_set import (REFERENCE_SET_SENTENCES,
                                                       reference_set_corpus)

    use_set = state.get("reference_set") is not False              # the view's default: on
    in_set = reference_set_corpus(comp.word.casefold(), REFERENCE_SET_SENTENCES) if use_set else []
    vocab = vocabulary_file(emb.model.info.options_path)
    words = read_vocabulary(vocab) if vocab is not None else []
    index = build_index(emb, [list(t) for t in tokens] + in_set + reference, words)
    query = (_occurrence(state.get("selected"), comp.occurrences)
             or _occurrence(selection, comp.occurrences) or comp.occurrences[0])
    s, t = query
    table = neighbour_table(index, acts[s][:, t], comp.word, k, direction, [query])
    rows = [dict(zip(NEIGHBOUR_COLUMNS, r)) for r in table.csv_rows(index)]
    corpus = (f"the {len(tokens)} sentences"
              + (f", {len(in_set)} reference-set sentences of '{comp.word}'" if in_set else "")
              + (f" and {ref_name}" if ref_name else ""))
    part.parameters |= {"contexts: neighbours": f"k = {k} per layer, {direction} halves, "
                                                f"the occurrence in sentence {s + 1} "
                                                f"(token {t + 1})"}
    firsts = "; ".join(f"{name}: {index.tokens[nbs[0].sentence][nbs[0].token]} "
                       f"({nbs[0].score:.3f})" for name, nbs in table.layers if nbs)
    part.tables.append(ReportTable(
        "contexts_neighbours", f"Nearest neighbours of '{comp.word}' per layer", rows,
        list(NEIGHBOUR_COLUMNS),
        caption=f"The {k} tokens nearest (cosine, {direction} halves) to the occurrence of "
                f"'{comp.word}' in sentence {s + 1} (token {t + 1}) per contextual layer, among "
                f"the {index.n_tokens:,} tokens of {corpus} (itself left out); layer 0: the "
                f"nearest of {len(index.words or [])} known words by their character-CNN "
                f"vectors. Nearest per layer: {firsts or 'none'}. sentence and token are "
                "0-based places in that corpus (the workspace's sentences first), as "
                "contexts --neighbours-csv writes them."))
    return part
