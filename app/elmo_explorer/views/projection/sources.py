"""Where the projection view's points come from and what colours them.

* the **reference** source (the default): the current word's occurrences in the bundled reference
  corpus (``resources/reference_corpus/word_contexts.tsv``, a few hundred sentences per demo
  word; other words from ``sentences.txt``) together with its occurrences in the loaded
  sentences, which are ringed;
* colours by **group** (a group<TAB>sentence file's group; reference sentences by their source),
  **sense** (the group's sense for the word, :mod:`elmo_engine.analysis.contexts.groups`), **part of
  speech / label** (the tags of a labelled data set file, e.g. the demo POS task's
  ``resources/demo_tasks/pos/dev.tsv``), **sentence** or **word**.
"""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Tuple

from elmo_engine.errors import InputError
from elmo_engine.analysis.contexts.groups import split_group
from elmo_engine.analysis.projection import (TokenSet, all_tokens, labelled_tokens,
                                             load_labelled, word_tokens)
from elmo_engine.analysis.projection.tokens import check_words_occur, reference_word_sentences
from elmo_explorer.views.projection.model import ProjectionModel
from elmo_explorer.views.projection.plots import categories
from elmo_explorer.state.words import default_word


def reference_word(typed: List[str], ws) -> str:
    """The word of the reference source: the first ``typed`` in the field, else the workspace's
    selected word, else the default ("bank")."""
    if typed:
        return typed[0]
    if ws.selection is not None:
        return ws.word_at(ws.selection)
    return default_word(ws.tokens)


def reference_request(ws, m: ProjectionModel, word: str, cap: int):
    """``word``'s occurrences in the bundled reference corpus plus the loaded sentences
    (ringed), embedded on the worker; groups and senses from the loaded sentences' groups.
    ``(tokens, None)``, or a message; fills ``m``'s reference cache and sentence info."""
    if not word:
        return "Type a word to find in the reference corpus."
    ref = m.reference_cache.get(word)
    if ref is None:
        ref = m.reference_cache[word] = reference_word_sentences(word)
    info = loaded_info(ws)
    for r in ref:
        info.setdefault(r.tokens, (f"reference: {r.source}", False))
    m.sentence_info = info
    m.reference_labels = {r.tokens: r for r in ref if r.senses or r.upos is not None}
    sentences = [list(t) for t in ws.tokens] + [list(r.tokens) for r in ref]
    tokens = word_tokens(sentences, [word])
    if len(tokens) == 0:
        return f"'{word}' occurs neither in the reference corpus nor in the sentences."
    tokens.source = f"'{word}': {len(ref):,} reference sentences + the loaded ones"
    return tokens.sample(cap).compact(), None


def request(ws, m: ProjectionModel, key: str, cap: int, words: List[str]):
    """What to project from source ``key`` ("dataset", "reference", "words", "loaded"), at
    most ``cap`` points: ``(tokens, activations)`` (activations None: embed on the worker), a
    message, or None while the sentences are still being embedded."""
    if ws.embedder is None or ws.n_layers == 0:
        return "Load a model to project tokens."
    if key == "dataset":
        if m.dataset is None:
            return "Open a labelled data set (CoNLL-U, WSD XML or token<TAB>label TSV)."
        return m.dataset.sample(cap).compact(), None
    if not ws.all_embedded():
        return None
    m.sentence_info = loaded_info(ws)
    m.reference_labels = {}
    if key == "reference":
        return reference_request(ws, m, reference_word(words, ws), cap)
    if key == "words":
        if not words:
            return "Type the words to project."
        try:                                # as `project --words`: an absent word is said
            check_words_occur(ws.tokens, words, "the loaded sentences")
        except InputError as e:
            return str(e)
        tokens = word_tokens(ws.tokens, words)
    else:
        tokens = all_tokens(ws.tokens, f"{len(ws.tokens):,} loaded sentences")
    # the mix's layer statistics over the sentences that hold a point, as `project` (which
    # compacts them) computes them; the others left out, not removed, so that a point's
    # sentence stays the workspace's sentence (a click selects it)
    tokens = tokens.sample(cap)
    kept = set(tokens.used_sentences())
    return tokens, [a if i in kept else None for i, a in enumerate(ws.activations)]


def loaded_info(ws) -> dict:
    """Sentence tokens → (group, typed=True) for the loaded sentences."""
    return {tuple(toks): (ws.sentence_groups.get(text, "") or "typed (no group)", True)
            for text, toks in zip(ws.sentences, ws.tokens)}


def typed_points(t: TokenSet, info: dict) -> List[int]:
    """The points of ``t`` from the loaded (typed) sentences, which the reference source rings;
    ``info``: sentence tokens → (group, typed)."""
    return [i for i in range(len(t))
            if info.get(tuple(t.sentences[t.sentence[i]]), ("", False))[1]]


NO_SENSE = "reference (no sense label)"


def _point_labels(t: TokenSet, info: dict, refs: dict) -> List[Tuple[str, str, Optional[str]]]:
    """Per point ``(group, sense shown, sense name or None)``: a sense-tagged reference
    occurrence is in group ``"word: sense"`` and sense ``sense``; a loaded sentence's sense is its
    group's (:mod:`elmo_engine.analysis.contexts.groups`) when the group names this word."""
    out: List[Tuple[str, str, Optional[str]]] = []
    for s, p, w in zip(t.sentence.tolist(), t.position.tolist(), t.words):
        toks = tuple(t.sentences[s])
        group, typed = info.get(toks, ("(no group)", False))
        ref = refs.get(toks)
        if not typed:
            sense = ref.senses.get(p) if ref is not None else None
            out.append((f"{w.casefold()}: {sense}" if sense else group, sense or NO_SENSE,
                        sense))
            continue
        word, name = split_group(group) if not group.startswith("typed (") else (None, "")
        if not name:
            out.append((group, "typed (no sense)", None))
        elif word is None or word.casefold() == w.casefold():
            out.append((group, name, name))
        else:
            out.append((group, "(other words)", None))
    return out


def _pos_label(t: TokenSet, i: int, refs: dict) -> str:
    ref = refs.get(tuple(t.sentences[int(t.sentence[i])]))
    if ref is None or ref.upos is None:
        return "(no tag)"
    return ref.upos[int(t.position[i])]


def colour_categories(t: TokenSet, by: str, info: dict, refs: Optional[dict] = None):
    """``(codes, legend)`` of the tokens ``t`` for the colour-by choice ``by`` (see
    categories); ``info``: sentence tokens → (group, typed); ``refs``: sentence tokens → the
    sense-tagged reference sentence (senses, UPOS). By group and by sense, the senses come first
    in the order of their names, so a sense keeps its colour in both modes ("bank: river" and
    "river")."""
    refs = refs or {}
    if by == "label" and refs:                  # the reference set's UPOS tags
        return categories([_pos_label(t, i, refs) for i in range(len(t))])
    if by == "label" and t.labels is not None:
        return categories([t.label_of(i) or "(none)" for i in range(len(t))])
    if by in ("group", "sense"):
        rows = _point_labels(t, info, refs)
        pick = 0 if by == "group" else 1
        values = [r[pick] for r in rows]
        senses = {r[pick]: r[2] for r in rows if r[2] is not None}
        return categories(values, first=senses)
    if by == "sentence":
        return categories([f"{s + 1}: {' '.join(t.sentences[s][:6])}"
                           for s in t.sentence.tolist()], by_frequency=False)
    return categories(t.words)


def dataset_job(path: Path):
    """The job that reads a labelled data set file into a token set."""
    def job(state) -> TokenSet:
        state.report(0, 1, f"reading {path.name}")
        return labelled_tokens(load_labelled(path), source=path.name)

    return job


def ask_dataset_path(parent) -> str:
    """A labelled data set file to open ("": cancelled)."""
    from elmo_explorer.common.save_dialog import open_file_name

    return open_file_name(parent, "Open a labelled data set",
                          "Labelled data (*.conllu *.conllu.gz *.xml *.tsv *.txt *.gz);;"
                          "All files (*)")
