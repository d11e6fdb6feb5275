"""The Characters view's share of a report, computed from its saved state (the workspace's
``views["characters"]``): the word lab of the typed words as a table, and the perturbation sweep
of the chosen word in its sentence as a table and a figure — the same functions the view calls
(:func:`.word_lab.analyse`, :func:`.perturb.sweep`), so the app's Export report… and
``elmo-explorer export report`` agree.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional

from elmo_engine.io.report import ReportPart, ReportTable, saved_figures

VIEW = "characters"
#: filters and nearest known words listed per word
TOP_FILTERS = 3
NEIGHBOURS = 5
#: words of the lab in a report at most
MAX_WORDS = 20


def characters_part(emb, state: Any, figure_dir: Optional[Path], style,
                    model_name: str = "the model", tokenization: str = "tokenize") -> ReportPart:
    """The report part of the Characters view's ``state`` (empty when it names nothing); the
    sweep's sentence is split as the workspace's ``tokenization`` says, as the view splits it."""
    part = ReportPart()
    if not isinstance(state, dict) or emb is None:
        return part
    words = [w for w in str(state.get("words") or "").split() if w][:MAX_WORDS]
    if words:
        part.tables.append(word_lab_table(emb, words, model_name, state, part.notes))
    sentence, word = state.get("sentence"), state.get("word")
    if isinstance(sentence, str) and isinstance(word, str) and sentence.strip() and word:
        _add_sweep(part, emb, sentence, word, figure_dir, style, model_name, tokenization)
    return part


def word_lab_table(emb, words: List[str], model_name: str, state: Any = None,
                   notes: Optional[List[str]] = None) -> ReportTable:
    """The word lab of ``words``, the known words as the saved ``state`` chose them (the
    reference corpus's word types, the model's vocab.txt or a file; one that cannot be read is
    a note and the reference corpus's are used)."""
    from elmo_engine.analysis.characters.windows import filters_of
    from elmo_engine.analysis.characters.word_lab import (Vocabulary, analyse, known_words,
                                                          reference_words, REFERENCE_SOURCE)
    from elmo_engine.errors import InputError

    state = state if isinstance(state, dict) else {}
    choice = str(state.get("vocabulary") or "reference")
    try:
        known, source = known_words(choice, str(state.get("vocabulary_file") or ""),
                                    emb.model.info.options_path)
    except InputError as e:
        if notes is not None:
            notes.append(f"Characters: the saved vocabulary ({choice}) cannot be used ({e}); "
                         f"the known words are {REFERENCE_SOURCE}.")
        known, source = reference_words(), REFERENCE_SOURCE
    vocab = Vocabulary.from_embedder(emb, known, source)
    filters = filters_of(emb.model.char_cnn)
    rows: List[Dict[str, Any]] = []
    for r in analyse(filters, words, vocab, neighbours=NEIGHBOURS):
        d = r.to_dict(filters, TOP_FILTERS)
        rows.append({
            "word": d["word"], "characters": d["characters"], "utf8 bytes": d["utf8_bytes"],
            "truncated": d["truncated"], "norm": d["norm"],
            "norm percentile": d["norm_percentile"],
            "top filters": "; ".join(f"#{h['filter']} '{h['ngram']}' {h['value']:.2f}"
                                     for h in d["top_filters"]),
            "highway transform share": " / ".join(f"{h['transform_share']:.2f}"
                                                  for h in d["highway"]),
            "nearest known words": ", ".join(f"{n['word']} {n['cosine']:.2f}"
                                             for n in d["neighbours"])})
    return ReportTable(
        "characters_words", "Characters: what the char-CNN makes of each word", rows,
        caption=f"{model_name}: the character ids each word is read as (⟨ ⟩: the begin- and "
                f"end-of-word marks), its {TOP_FILTERS} strongest filters with the n-gram that "
                "wins each one's max-pool, the share of each highway layer's dimensions "
                "transformed (the rest carried), the layer-0 norm and its percentile among "
                f"{len(vocab.words):,} known words ({vocab.source}), and the "
                f"{NEIGHBOURS} nearest of them at layer 0 (cosine).")


def _add_sweep(part: ReportPart, emb, sentence: str, word: str, figure_dir: Optional[Path],
               style, model_name: str, tokenization: str = "tokenize") -> None:
    from elmo_engine.analysis.characters.perturb import PER_KIND, sweep
    from elmo_engine.model.tokenize import sentence_tokens

    tokens = sentence_tokens(sentence, tokenization)
    if word not in tokens:
        part.notes.append(f"Characters: '{word}' is not a token of the saved sentence; no "
                          "perturbation sweep.")
        return
    result = sweep(emb, [tokens], word, PER_KIND)
    summary = result.summary()
    n_layers = result.cosines.shape[2]
    rows = []
    for kind, m in summary.items():
        row: Dict[str, Any] = {"perturbation": kind.value}
        row["layer 0"] = round(float(m[0, 0]), 4)
        for layer in range(1, n_layers):
            row[f"layer {layer} forward"] = round(float(m[layer, 1]), 4)
            row[f"layer {layer} backward"] = round(float(m[layer, 2]), 4)
        rows.append(row)
    where = f"'{word}' in “{' '.join(tokens)}”"
    caption = (f"{model_name}: mean cosine of each perturbed spelling's vectors to the "
               f"original's, per type ({PER_KIND} variants a type, seed 0), for {where}; "
               "layer 0 is the context-free token layer, layers 1+ per direction (the forward "
               "LM sees the left context, the backward LM the right).")
    part.tables.append(ReportTable("characters_perturbation",
                                   f"Characters: perturbations of '{word}' in context", rows,
                                   caption=caption))
    if figure_dir is not None:
        from elmo_engine.io.figures.characters import perturbation_figure

        fig = perturbation_figure({k.value: m.tolist() for k, m in summary.items()},
                                  f"perturbations of '{word}' in context")
        part.figures += saved_figures(fig, figure_dir, "characters_perturbation", caption, style)
