"""The bundled reference set, one for every view (issue 39): ``resources/reference_corpus/``.

* ``word_senses.tsv``: SemCor 3.0 sentences of the demo words (Miller et al. 1993), each
  occurrence tagged with its WordNet sense and every token with its UD UPOS tag;
* ``word_contexts.tsv``: a few hundred sentences of each demo word from fiction and textbooks;
* ``sentences.txt``: 4,000 general sentences (the Corpus view's index, the Layers view).

:func:`reference_word_sentences` gives a word's sentences (the Projection view's reference points,
the Contexts view's neighbour corpus: as in Peters et al. 2018's Table 4, the nearest neighbours of
a word in context are found among sense-tagged SemCor sentences).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from elmo_engine.errors import InputError

#: most sentences of a word added to the Contexts view's / ``contexts``' neighbour corpus (its
#: SemCor sentences first; ~6,500 tokens for "bank", indexed in seconds)
REFERENCE_SET_SENTENCES = 250

@dataclass(frozen=True)
class ReferenceSentence:
    """One sentence of the bundled reference set for a word.

    ``senses``: token index → sense name of the word's sense-tagged occurrences ("river");
    ``upos``: one UD UPOS tag per token, or None (untagged sentences)."""

    source: str
    tokens: Tuple[str, ...]
    senses: Dict[int, str] = field(default_factory=dict)
    upos: Optional[Tuple[str, ...]] = None


#: the bundled reference set: ``resources/reference_corpus/`` files
WORD_SENSES = "word_senses.tsv"
WORD_CONTEXTS = "word_contexts.tsv"
GENERAL = "sentences.txt"
SENSE_SOURCE = "semcor"


def read_word_senses(path: Path, word: str) -> List[ReferenceSentence]:
    """The sense-tagged sentences of ``word`` in a ``word<TAB>sense<TAB>sense_key<TAB>target
    <TAB>tokens<TAB>upos`` file (``word_senses.tsv``; ``#`` lines are comments); several tagged
    occurrences in one sentence make one sentence. Case is ignored."""
    from elmo_engine.io.datasets.textio import iter_lines

    target = word.casefold()
    found: Dict[Tuple[str, ...], ReferenceSentence] = {}
    for n, line in iter_lines(path):
        if not line.strip() or line.startswith("#"):
            continue
        f = line.split("\t")
        if len(f) != 6 or not f[3].isdigit():
            raise InputError("expected 'word sense sense_key target tokens upos'", path=path,
                             line=n)
        if f[0].casefold() != target:
            continue
        toks, tags = tuple(f[4].split(" ")), tuple(f[5].split(" "))
        i = int(f[3])
        if len(tags) != len(toks) or i >= len(toks):
            raise InputError(f"{len(toks)} tokens, {len(tags)} tags, target {i}", path=path,
                             line=n)
        ref = found.setdefault(toks, ReferenceSentence(SENSE_SOURCE, toks, {}, tags))
        ref.senses[i] = f[1]
    return list(found.values())


def reference_word_sentences(word: str, path=None) -> List[ReferenceSentence]:
    """The sentences of the bundled reference set for ``word``, tokenized: its sense-tagged
    SemCor sentences (``resources/reference_corpus/word_senses.tsv``, with senses and UPOS), then
    its contexts from fiction and textbooks (``word_contexts.tsv``, ``word<TAB>source<TAB>
    sentence``, a few hundred per demo word, unlabelled); a word in neither is looked up in the
    general ``sentences.txt``. ``path``: a ``word_contexts.tsv``-like file of one's own instead.
    Case is ignored."""
    from elmo_engine.io.datasets.textio import iter_lines
    from elmo_engine.model.tokenize import tokenize
    from elmo_engine.resources import HERE

    folder = HERE / "reference_corpus"
    target = word.casefold()
    out: List[ReferenceSentence] = []
    if path is None:
        out += read_word_senses(folder / WORD_SENSES, word)
    for _n, line in iter_lines(path or folder / WORD_CONTEXTS):
        w, _t, rest = line.partition("\t")
        if w.casefold() == target:
            src, _t, text = rest.partition("\t")
            out.append(ReferenceSentence(src, tuple(tokenize(text))))
    if not out and path is None:
        for _n, line in iter_lines(folder / GENERAL):
            if target in line.casefold():
                toks = tokenize(line)
                if any(t.casefold() == target for t in toks):
                    out.append(ReferenceSentence("reference corpus", tuple(toks)))
    return out


def reference_set_corpus(word: str, limit: int) -> List[List[str]]:
    """The tokens of at most ``limit`` reference-set sentences of ``word`` (its sense-tagged
    SemCor sentences first): the Contexts view's and ``contexts``' neighbour corpus beside the
    user's sentences."""
    return [list(r.tokens) for r in reference_word_sentences(word)[:max(0, limit)]]
