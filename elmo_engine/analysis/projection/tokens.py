"""Which tokens to project: a :class:`TokenSet` picked from tokenized sentences.

A token set keeps the sentences it was picked from (for the model and for showing a token in its
context) and, per point, the sentence index, the token position and an optional label. Three ways
to build one: every token of some sentences (:func:`all_tokens`), the occurrences of a word list
(:func:`word_tokens`), and the labelled tokens of a data set (:func:`labelled_tokens`, files read
by :func:`load_labelled`: CoNLL-U, the WSD framework XML + key, or ``token<TAB>label`` TSV).
"""
from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Iterable, List, Optional, Sequence, Tuple

import numpy as np

from elmo_engine.io.datasets.records import LabelledSentence
# the bundled reference set's readers, importable from here too
from elmo_engine.io.datasets.reference_set import (GENERAL, SENSE_SOURCE, WORD_CONTEXTS,  # noqa: F401
                                                   WORD_SENSES, ReferenceSentence,
                                                   read_word_senses, reference_word_sentences)
from elmo_engine.errors import InputError

_WS = re.compile(r"\s+")
_LIST_SEP = re.compile(r"[\s,;]+")


class TokenSet:
    """Points to project: tokens chosen from a list of tokenized sentences.

    Parameters
    ----------
    sentences : the tokenized sentences the points come from (all are embedded, for context)
    sentence : ``(N,)`` sentence index of each point
    position : ``(N,)`` token index of each point within its sentence
    labels : one label (or None) per point, or None when the set has no labels
    source : a short description shown to the user ("3 sentences", "en_ewt-ud-dev.conllu")
    """

    def __init__(self, sentences: Sequence[Sequence[str]], sentence: "Sequence[int] | np.ndarray",
                 position: "Sequence[int] | np.ndarray", labels: Optional[Sequence[Optional[str]]] = None,
                 source: str = ""):
        self.sentences: Tuple[Tuple[str, ...], ...] = tuple(tuple(s) for s in sentences)
        self.sentence = np.asarray(sentence, dtype=np.int64).reshape(-1)     # (N,)
        self.position = np.asarray(position, dtype=np.int64).reshape(-1)     # (N,)
        if self.sentence.shape != self.position.shape:
            raise InputError(f"{self.sentence.size} sentence indices but {self.position.size} "
                             "positions")
        lengths = np.array([len(s) for s in self.sentences] or [0], dtype=np.int64)
        if self.sentence.size and (self.sentence.min() < 0
                                   or self.sentence.max() >= len(self.sentences)):
            raise InputError("a token refers to a sentence that is not in the set")
        if self.position.size and (self.position.min() < 0
                                   or np.any(self.position >= lengths[self.sentence])):
            raise InputError("a token position is past the end of its sentence")
        self.labels: Optional[Tuple[Optional[str], ...]] = None
        if labels is not None:
            self.labels = tuple(None if lab is None else str(lab) for lab in labels)
            if len(self.labels) != self.sentence.size:
                raise InputError(f"{self.sentence.size} tokens but {len(self.labels)} labels")
        self.sentence.setflags(write=False)
        self.position.setflags(write=False)
        self.source = source
        self.words: Tuple[str, ...] = tuple(self.sentences[s][p]
                                            for s, p in zip(self.sentence.tolist(),
                                                            self.position.tolist()))
        self.digest = self._digest()

    def __len__(self) -> int:
        return int(self.sentence.size)

    def __repr__(self) -> str:
        return (f"TokenSet({len(self)} tokens from {len(self.sentences)} sentences"
                f"{', labelled' if self.labels is not None else ''}, {self.source!r})")

    def _digest(self) -> str:
        h = hashlib.sha256()
        for s in self.sentences:
            h.update("\x1f".join(s).encode("utf-8", "surrogatepass") + b"\x1e")
        h.update(self.sentence.tobytes())
        h.update(self.position.tobytes())
        if self.labels is not None:
            h.update("\x1f".join("\x00" if x is None else x for x in self.labels)
                     .encode("utf-8", "surrogatepass"))
        return h.hexdigest()

    def label_of(self, i: int) -> str:
        """The label of point ``i`` as text ('' when the set or the point has none)."""
        label = None if self.labels is None else self.labels[i]
        return "" if label is None else label

    def sentence_text(self, i: int) -> str:
        """The whole sentence of point ``i``, tokens joined by spaces."""
        return " ".join(self.sentences[int(self.sentence[i])])

    def context(self, i: int, window: int = 8, mark: Tuple[str, str] = ("[", "]")) -> str:
        """Point ``i`` in its sentence: up to ``window`` words each side, the token marked."""
        sent = self.sentences[int(self.sentence[i])]
        p = int(self.position[i])
        left = sent[max(0, p - window):p]
        right = sent[p + 1:p + 1 + window]
        parts = (["…"] if p - window > 0 else []) + list(left) + [f"{mark[0]}{sent[p]}{mark[1]}"]
        parts += list(right) + (["…"] if p + 1 + window < len(sent) else [])
        return " ".join(parts)

    def find(self, word: str, case_sensitive: bool = False) -> np.ndarray:
        """Indices of the points whose token is ``word``."""
        if case_sensitive:
            return np.flatnonzero([w == word for w in self.words])
        low = word.casefold()
        return np.flatnonzero([w.casefold() == low for w in self.words])

    def sample(self, max_points: int, seed: int = 0) -> "TokenSet":
        """At most ``max_points`` points, drawn uniformly without replacement (order kept)."""
        if max_points <= 0:
            raise InputError(f"max_points must be positive, got {max_points}")
        if len(self) <= max_points:
            return self
        keep = np.sort(np.random.default_rng(seed).choice(len(self), max_points, replace=False))
        labels = None if self.labels is None else [self.labels[k] for k in keep]
        return TokenSet(self.sentences, self.sentence[keep], self.position[keep], labels,
                        f"{self.source} (sample of {max_points:,})")

    def used_sentences(self) -> List[int]:
        """The sentences the points come from, in order: those :meth:`compact` keeps."""
        return np.unique(self.sentence).tolist()

    def compact(self) -> "TokenSet":
        """The same points with only the sentences they come from (fewer sentences to embed)."""
        used = np.unique(self.sentence)
        if used.size == len(self.sentences):
            return self
        remap = np.full(len(self.sentences), -1, np.int64)
        remap[used] = np.arange(used.size)
        return TokenSet([self.sentences[s] for s in used.tolist()], remap[self.sentence],
                        self.position, self.labels, self.source)


def all_tokens(sentences: Sequence[Sequence[str]], source: str = "") -> TokenSet:
    """Every token of every sentence, in reading order."""
    sent = [i for i, s in enumerate(sentences) for _ in s]
    pos = [j for s in sentences for j in range(len(s))]
    return TokenSet(sentences, sent, pos, None, source or f"{len(sentences):,} sentences")


def parse_word_list(text: str) -> List[str]:
    """Words separated by spaces, commas, semicolons or new lines; duplicates dropped."""
    return list(dict.fromkeys(w for w in _LIST_SEP.split(text) if w))


def check_words_occur(sentences: Sequence[Sequence[str]], words: Iterable[str], where: str,
                      path: Optional[Path] = None) -> None:
    """Refuse the first of ``words`` that occurs in no sentence (any case), with a did-you-mean
    (:func:`~elmo_engine.errors.absent_word`): ``project --words`` and the Projection view's
    word list alike."""
    from elmo_engine.errors import absent_word

    present = {t.casefold() for s in sentences for t in s}
    for w in words:
        if w.casefold() not in present:
            raise absent_word(w, sentences, where, path=path)


def word_tokens(sentences: Sequence[Sequence[str]], words: Iterable[str],
                case_sensitive: bool = False) -> TokenSet:
    """Every occurrence of the given words in the sentences; the label of a point is its word.

    Raises
    ------
    InputError
        If the word list is empty.
    """
    wanted = list(dict.fromkeys(words))
    if not wanted:
        raise InputError("the word list is empty")
    norm = (lambda w: w) if case_sensitive else str.casefold
    canon = {norm(w): w for w in wanted}
    sent, pos, labels = [], [], []
    for i, s in enumerate(sentences):
        for j, t in enumerate(s):
            hit = canon.get(norm(t))
            if hit is not None:
                sent.append(i)
                pos.append(j)
                labels.append(hit)
    return TokenSet(sentences, sent, pos, labels, f"words: {', '.join(wanted[:5])}"
                    + ("…" if len(wanted) > 5 else ""))


def labelled_tokens(data: Iterable[LabelledSentence], targets_only: bool = True,
                    source: str = "") -> TokenSet:
    """Tokens of a labelled data set; with ``targets_only`` only the tokens that have a label.

    Tokens containing whitespace (a CoNLL-U FORM such as ``1 000``) are fed to the model with
    each whitespace run replaced by ``_``, since a model token cannot contain whitespace.
    """
    sentences: List[Tuple[str, ...]] = []
    sent, pos, labels = [], [], []
    for ls in data:
        toks = tuple(_WS.sub("_", t.strip()) or "_" for t in ls.tokens)
        i = len(sentences)
        sentences.append(toks)
        for j, lab in enumerate(ls.labels):
            if lab is None and targets_only:
                continue
            sent.append(i)
            pos.append(j)
            labels.append(lab)
    return TokenSet(sentences, sent, pos, labels, source)


def load_labelled(path, limit: Optional[int] = None, label: str = "upos"
                  ) -> List[LabelledSentence]:
    """Read a labelled data set, choosing the reader by the file name.

    ``*.conllu[.gz]`` → CoNLL-U (``label``: upos, xpos, deprel or lemma); ``*.xml[.gz]`` → the
    WSD framework XML, with the gold keys of a ``<stem>.gold.key.txt`` beside it when present
    (label = first gold sense key); anything else → ``token<TAB>label`` TSV.

    Raises
    ------
    InputError
        From the readers, naming the file and line.
    """
    p = Path(path)
    name = p.name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    if name.endswith(".conllu"):
        from elmo_engine.io.datasets.conllu import read_conllu
        return list(read_conllu(p, label=label, limit=limit))
    if name.endswith(".xml"):
        from elmo_engine.io.datasets.wsd import read_wsd
        stem = p.name[:p.name.lower().rfind(".xml")]
        stem = stem[:-5] if stem.lower().endswith(".data") else stem
        key = next((k for k in (p.with_name(stem + ".gold.key.txt"),
                                p.with_name(stem + ".gold.key.txt.gz")) if k.is_file()), None)
        return [s.to_labelled() for s in read_wsd(p, key, limit=limit)]
    from elmo_engine.io.datasets.tsv import read_tsv
    return list(read_tsv(p, limit=limit))


def tokens_from_file(path: Path, labelled: bool = False, words: Optional[str] = None) -> TokenSet:
    """The tokens of a file to project (``elmo-explorer project``).

    ``labelled``: ``path`` is a data set (:func:`load_labelled`) and its labelled tokens are
    the points; else it holds sentences, one per line, tokenized like typed text, and every
    token is a point. ``words`` (comma or space separated) keeps only those words' tokens.
    """
    path = Path(path)
    if labelled:
        tokens = labelled_tokens(load_labelled(path), source=path.name)
        if words:
            wanted = {w.casefold() for w in parse_word_list(words)}
            keep = [i for i, w in enumerate(tokens.words) if w.casefold() in wanted]
            tokens = type(tokens)(tokens.sentences, tokens.sentence[keep], tokens.position[keep],
                                  None if tokens.labels is None else
                                  [tokens.labels[i] for i in keep], tokens.source)
        return tokens
    from elmo_engine.io.datasets.sentences import read_sentences
    from elmo_engine.model.tokenize import tokenize

    sents = [t for t in (tokenize(s) for s in read_sentences(path)) if t]
    if not sents:
        raise InputError("no sentences", path=path)
    if words:
        return word_tokens(sents, parse_word_list(words))
    return all_tokens(sents, path.name)
