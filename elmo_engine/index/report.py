"""The Corpus view's share of a report, computed from its saved state (the workspace's
``views["corpus"]``: the index folder, the options and the query occurrence): the concordance of
the query in every indexed layer and the word's induced senses per layer, as tables, and the
senses as a figure — the functions the view calls (:meth:`CorpusIndex.search`,
:func:`~elmo_engine.index.senses.induce_from_index`), so the app's Export report… and
``elmo-explorer export report`` agree. The map is the view's own export (File ▸ Export ▸ Corpus
map): it is drawn from the view's PCA and its box selection, which a report does not redo.

An index that cannot be opened (moved, built with another model) is a note, never an error: the
rest of the report is written.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from elmo_engine.io.report import ReportPart, ReportTable, saved_figures

VIEW = "corpus"
#: the options' bounds as the view reads them (a saved workspace is checked, not trusted)
MAX_K = 1000
#: the words of a cluster's context and its typical sentence, in a table cell
CONTEXT_WORDS = 5
#: an any-word concordance searches each layer's graph, which the app's report would load into
#: memory a second time beside the Corpus view's (gigabytes for ~10^7 tokens): above this many
#: tokens the app leaves it to the view, said in a note (a same-word concordance reads the word's
#: rows only; ``export report``, with no view open, has no such limit)
REPORT_ANN_TOKENS = 1_000_000


def saved_query(state: Any) -> Optional[Tuple[str, str, Tuple[str, ...], int, int, bool]]:
    """``(index folder, word, tokens, position, k, same word)`` of a saved Corpus view state,
    or None when it names no index or no valid query."""
    if not isinstance(state, dict):
        return None
    folder, q = state.get("index"), state.get("query")
    if not (isinstance(folder, str) and folder and isinstance(q, dict)):
        return None
    toks, pos, word = q.get("tokens"), q.get("position"), q.get("word")
    if not (isinstance(toks, list) and toks and all(isinstance(t, str) for t in toks)
            and isinstance(pos, int) and not isinstance(pos, bool) and 0 <= pos < len(toks)
            and isinstance(word, str) and word):
        return None
    given = state.get("options")
    opts: Dict[str, Any] = given if isinstance(given, dict) else {}

    def whole(key: str, default: int, low: int, high: int) -> int:
        v = opts.get(key, default)
        ok = isinstance(v, int) and not isinstance(v, bool) and low <= v <= high
        return v if ok else default

    same = opts.get("same_word", True)
    return (folder, word, tuple(toks), pos, whole("k", 10, 1, MAX_K),
            same if isinstance(same, bool) else True)


def corpus_part(emb, state: Any, figure_dir: Optional[Path], style,
                model_name: str = "the model", ann_limit: Optional[int] = None) -> ReportPart:
    """The report part of the Corpus view's saved ``state`` (empty when it names no index and
    query; a note when the index cannot be opened under ``emb``'s model). ``ann_limit``: the
    most tokens an any-word concordance searches the graphs of (None: any; the app passes
    :data:`REPORT_ANN_TOKENS`)."""
    from elmo_engine.errors import ElmoError
    from elmo_engine.index.search import CorpusIndex, query_vectors
    from elmo_engine.index.senses import K_MAX, induce_from_index

    part = ReportPart()
    saved = saved_query(state)
    if saved is None or emb is None:
        return part
    folder, word, tokens, pos, k, same_word = saved
    try:
        index = CorpusIndex(Path(folder), emb.checksum)
    except ElmoError as e:
        part.notes.append(f"Corpus: the saved index cannot be opened ({e}); its concordance "
                          "and senses are left out.")
        return part
    n_tokens = index.manifest.n_tokens
    concordance = same_word or ann_limit is None or n_tokens <= ann_limit
    if not concordance:
        part.notes.append(f"Corpus: the any-word concordance of “{word}” over {n_tokens:,} "
                          "tokens is the view's own export (a report does not load the index's "
                          "graphs a second time); its senses are here.")
    try:
        vectors = query_vectors(emb, tokens, pos, index.layers) if concordance else {}
        rows: List[Dict[str, Any]] = []
        for layer in index.layers if concordance else ():
            for rank, h in enumerate(index.search(vectors[layer], layer, k,
                                                  word if same_word else None), 1):
                left, w, right = h.kwic(40)
                rows.append({"layer": layer, "rank": rank, "cosine": round(h.cosine, 4),
                             "sentence": h.sentence_id, "left": left, "word": w,
                             "right": right})
        where = (f"{index.manifest.n_sentences:,} sentences ({index.manifest.n_tokens:,} tokens)"
                 f" of {Path(folder).name}")
        senses = induce_from_index(index, word)
    except ElmoError as e:              # a saved query the index cannot answer: a note
        part.notes.append(f"Corpus: the saved query of “{word}” cannot be answered from the "
                          f"index ({e}); its concordance and senses are left out.")
        return part
    finally:
        index.close()
    if concordance:
        part.tables.append(ReportTable(
            "corpus_concordance", "Corpus: the nearest occurrences per layer", rows,
            caption=f"{model_name}: the {k} occurrences nearest to “{word}” in “"
                    f"{' '.join(tokens)}” per indexed layer (cosine; "
                    f"{'the same word only' if same_word else 'any word'}), in {where}."))
    _add_senses(part, senses, figure_dir, style, model_name, K_MAX)
    return part


def senses_figure_of(senses):
    """The induced senses (a :class:`~elmo_engine.index.senses.SenseInduction`) as stacked
    bars per layer, each cluster labelled with its two most distinctive context words: the
    Corpus view's export and a report's figure alike."""
    from elmo_engine.io.figures import CATEGORY_PALETTE
    from elmo_engine.io.figures.corpus import senses_figure

    layers = [{"layer": ls.layer, "silhouette": ls.silhouette,
               "clusters": [(c.size, ", ".join(w for w, _ in c.context_words[:2]))
                            for c in ls.clusters]} for ls in senses.layers]
    return senses_figure(senses.word, layers, CATEGORY_PALETTE)


def _add_senses(part: ReportPart, senses, figure_dir: Optional[Path], style, model_name: str,
                k_max: int) -> None:
    rows: List[Dict[str, Any]] = []
    n = len(senses.occurrences)
    for ls in senses.layers:
        for c in ls.clusters:
            words = ", ".join(w for w, _ in c.context_words[:CONTEXT_WORDS])
            typical = senses.occurrences[c.typical[0]].text if c.typical else ""
            rows.append({"layer": ls.layer, "k": ls.k,
                         "silhouette": None if ls.silhouette != ls.silhouette
                         else round(ls.silhouette, 4),
                         "cluster": c.label + 1, "occurrences": c.size,
                         "share": round(c.size / max(1, n), 4),
                         "context words": words, "typical sentence": typical})
    caption = (f"{model_name}: “{senses.word}”'s {n:,} occurrences (of {senses.n_total:,} in "
               f"the index) clustered per layer, k from 2 to {k_max} by the cosine silhouette; "
               "each cluster's most distinctive context words (log-odds z-score) and its most "
               "typical sentence.")
    part.tables.append(ReportTable("corpus_senses", "Corpus: induced senses per layer", rows,
                                   caption=caption))
    if figure_dir is not None and senses.layers:
        part.figures += saved_figures(senses_figure_of(senses), figure_dir, "corpus_senses",
                                      caption, style)
