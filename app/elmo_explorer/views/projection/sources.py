"""Where the projection view's points come from and what colours them.

* the **reference** source (the default): the current word's occurrences in the bundled reference
  corpus (``resources/reference_corpus/word_contexts.tsv``, a few hundred sentences per demo
  word; other words from ``sentences.txt``) together with its occurrences in the loaded
  sentences, which are ringed;
* colours by **group** (a group<TAB>sentence file's group; reference sentences by their source),
  **sense** (the group's sense for the word, :mod:`elmo_engine.analysis.groups`), **part of
  speech / label** (the tags of a labelled data set file, e.g. the demo POS task's
  ``resources/demo_tasks/pos/dev.tsv``), **sentence** or **word**.
"""
from __future__ import annotations

from elmo_engine.analysis.groups import split_group
from elmo_engine.analysis.projection import word_tokens
from elmo_engine.analysis.projection.tokens import reference_word_sentences
from elmo_explorer.views.words import default_word
from elmo_explorer.views.projection.plots import categories


def reference_word(panel) -> str:
    """The word of the reference source: typed in the field, else the selected word, else
    the contexts view's default ("bank")."""
    words = panel.view.controls.word_list()
    if words:
        return words[0]
    if panel.ws.selection is not None:
        return panel.ws.word_at(panel.ws.selection)
    return default_word(panel.ws.tokens)


def reference_request(panel, cap: int):
    """The word's occurrences in the bundled reference corpus plus the loaded sentences
    (ringed), embedded on the worker; groups and senses from the loaded sentences' groups."""
    ws, m = panel.ws, panel.model
    word = panel.reference_word()
    if not word:
        return "Type a word to find in the reference corpus."
    ref = m.reference_cache.get(word)
    if ref is None:
        ref = m.reference_cache[word] = reference_word_sentences(word)
    info = loaded_info(ws)
    for src, toks in ref:
        info.setdefault(tuple(toks), (f"reference: {src}", False))
    m.sentence_info = info
    sentences = [list(t) for t in ws.tokens] + [t for _s, t in ref]
    tokens = word_tokens(sentences, [word])
    if len(tokens) == 0:
        return f"'{word}' occurs neither in the reference corpus nor in the sentences."
    tokens.source = f"'{word}': {len(ref):,} reference sentences + the loaded ones"
    return tokens.sample(cap).compact(), None


def loaded_info(ws) -> dict:
    """Sentence tokens → (group, typed=True) for the loaded sentences."""
    return {tuple(toks): (ws.sentence_groups.get(text, "") or "typed (no group)", True)
            for text, toks in zip(ws.sentences, ws.tokens)}


def _sense(group: str, typed: bool, token: str) -> str:
    if not typed:
        return "reference (unlabelled)"
    word, sense = split_group(group) if not group.startswith("typed (") else (None, "")
    if not sense:
        return "typed (no sense)"
    return sense if word is None or word.casefold() == token.casefold() else "(other words)"


def colour_categories(panel):
    """``(codes, legend)`` of the drawn tokens for the colour-by choice (see categories)."""
    t = panel.model.tokens
    by = panel.view.controls.colour_by()
    if by == "label" and t.labels is not None:
        return categories([t.label_of(i) or "(none)" for i in range(len(t))])
    if by in ("group", "sense"):
        info = panel.model.sentence_info
        rows = [info.get(tuple(t.sentences[s]), ("(no group)", False))
                for s in t.sentence.tolist()]
        if by == "group":
            return categories([g for g, _typed in rows])
        return categories([_sense(g, typed, w) for (g, typed), w in zip(rows, t.words)])
    if by == "sentence":
        return categories([f"{s + 1}: {' '.join(t.sentences[s][:6])}"
                           for s in t.sentence.tolist()], by_frequency=False)
    return categories(t.words)
