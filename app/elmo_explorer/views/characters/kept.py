"""What the Characters view keeps between its jobs, safe to fill on the long lane's thread.

* the layer-0 vectors of the known-word vocabularies (:class:`~elmo_engine.analysis.characters.
  word_lab.Vocabulary`), kept per (model, vocabulary) — a published ``vocab.txt``'s take
  ~1.6 GB, so at most :data:`VOCABS_KEPT`;
* the corpus index of the In context tab, open while it is the one asked for;

and the In context tab's job (:func:`nonce_in_context`), which reads through both.

Filled and read on the long lane, cleared or looked at on the GUI thread: every access is under
one lock. What a vocabulary choice means (:func:`vocabulary_request`) is decided on the GUI
thread, from the view's model, before a job starts. No Qt here.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from elmo_explorer.views.characters.model import CharactersModel, VocabSource

#: vocabularies (their layer-0 vectors) kept: a published vocab.txt's take ~1.6 GB each
VOCABS_KEPT = 2


class ReadError(Exception):
    """A vocabulary or an index that could not be read: one line for the status."""


@dataclass(frozen=True)
class VocabRequest:
    """A chosen vocabulary: its cache key (a file's holds its size and time, so an edited file
    is read again), its source as shown, and the reader of its words."""

    key: tuple
    shown: str
    read: Callable[[], List[str]]

    @property
    def kind(self) -> str:
        """"reference", "model" or "file" (:class:`VocabSource`)."""
        return str(self.key[1])


def model_vocab_file(emb) -> Optional[Path]:
    """The ``vocab.txt`` beside the loaded checkpoint (the published models ship one)."""
    from elmo_engine.analysis.characters.word_lab import model_vocabulary_file

    return None if emb is None else model_vocabulary_file(emb.model.info.options_path)


def vocabulary_request(emb, model: CharactersModel) -> VocabRequest:
    """What the chosen vocabulary is, read on the GUI thread (the words themselves are read
    by the job: :func:`~elmo_engine.analysis.characters.word_lab.known_words`, as a report
    reads the saved choice). :class:`ReadError` when the choice names no readable file."""
    from elmo_engine.analysis.characters.word_lab import (MODEL_SOURCE, REFERENCE_SOURCE,
                                                          known_words)

    checksum, options = emb.checksum, emb.model.info.options_path
    src, file = model.vocab_source, model.vocab_file

    def read() -> List[str]:
        return known_words(src.value, file, options)[0]

    if src is VocabSource.REFERENCE:
        return VocabRequest((checksum, src.value), REFERENCE_SOURCE, read)
    path = model_vocab_file(emb) if src is VocabSource.MODEL else Path(file)
    if path is None:
        raise ReadError("the loaded checkpoint has no vocab.txt beside it")
    try:
        st = path.stat()
    except OSError as e:
        raise ReadError(f"{path}: {e.strerror or e}") from None
    shown = MODEL_SOURCE if src is VocabSource.MODEL else str(path)
    return VocabRequest((checksum, src.value, str(path), st.st_size, st.st_mtime_ns), shown, read)


class Kept:
    """The vocabularies' layer-0 vectors and the open corpus index, under one lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._vocabs: "OrderedDict[tuple, Any]" = OrderedDict()    # key → Vocabulary
        self._index: Optional[Tuple[str, str, Any]] = None         # (folder, checksum, index)

    def vocabulary(self, emb, request: VocabRequest, state):
        """The vocabulary's layer-0 vectors (on the long lane): kept per (model, vocabulary);
        the words read (bounded) then embedded with progress and cancel. A vocabulary whose
        job was cancelled is not kept."""
        from elmo_engine.analysis.characters.word_lab import Vocabulary
        from elmo_engine.errors import CancelledError, ElmoError

        with self._lock:
            if request.key in self._vocabs:
                self._vocabs.move_to_end(request.key)
                return self._vocabs[request.key]
        state.report(0, 2, f"reading the known words ({request.shown})")
        try:
            words = request.read()
        except CancelledError:
            raise
        except ElmoError as e:
            raise ReadError(str(e)) from None
        vocab = Vocabulary.from_embedder(emb, words, request.shown, state=state)
        with self._lock:
            self._vocabs[request.key] = vocab
            while len(self._vocabs) > VOCABS_KEPT:
                self._vocabs.popitem(last=False)
        return vocab

    def vocabulary_kinds(self) -> List[str]:
        """The kinds ("reference", "model", "file") of the vocabularies kept."""
        with self._lock:
            return [str(k[1]) for k in self._vocabs]

    def index(self, folder: Path, checksum: str):
        """The index at ``folder`` (on the long lane), kept open while it is the one asked for;
        an index of another model is refused (:class:`~elmo_engine.index.search.CorpusIndex`)."""
        from elmo_engine.index.search import CorpusIndex

        with self._lock:
            if self._index is not None and self._index[:2] == (str(folder), checksum):
                return self._index[2]
            old, self._index = self._index, None
        if old is not None:
            old[2].close()
        index = CorpusIndex(folder, checksum)
        with self._lock:
            self._index = (str(folder), checksum, index)
        return index


@dataclass
class NonceOutcome:
    """What the In context tab's job found: the softmax read (kept per model by the view), the
    word's predictions and layer-0 neighbours (``result``, None without a softmax), its
    nearest occurrences per layer in the index, and one line per part that could not be done."""

    softmax: Any = None
    result: Optional[dict] = None
    problem: str = ""
    vocab_problem: str = ""
    index_folder: Optional[Path] = None
    hits: Dict[int, List[dict]] = field(default_factory=dict)
    index_summary: str = ""
    index_problem: str = ""


def nonce_in_context(emb, kept: Kept, known: VocabRequest, softmax, model_folder: Path,
                     sentence: str, word: str, index_folder: Optional[Path], state,
                     k: int = 10, tokenization: str = "tokenize") -> NonceOutcome:
    """The In context tab, on the long lane: the softmax (read from ``model_folder`` unless
    given), the two LMs' predictions at the word and its layer-0 neighbours
    (:func:`~elmo_engine.analysis.characters.nonce.in_context`), and its nearest occurrences
    per layer in the index at ``index_folder`` (``INDEX_K`` each). The sentence is split as the
    workspace's ``tokenization`` says (Settings ▸ Tokenization)."""
    from elmo_engine.analysis.characters.nonce import in_context
    from elmo_engine.errors import CancelledError, ElmoError, InputError
    from elmo_engine.index.search import query_vectors
    from elmo_engine.model.softmax import load_softmax
    from elmo_engine.model.tokenize import sentence_tokens
    from elmo_explorer.views import corpus_index
    from elmo_explorer.views.characters.model import INDEX_K, not_a_token

    tokens = sentence_tokens(sentence, tokenization)
    if word not in tokens:
        raise InputError(not_a_token(word, tokens, tokenization))
    position = tokens.index(word)
    out = NonceOutcome(softmax=softmax, index_folder=index_folder)
    if out.softmax is None:
        state.report(0, 2, "reading the softmax")
        try:
            out.softmax = load_softmax(model_folder, output_dim=emb.opts.output_dim)
        except (ElmoError, OSError) as e:
            out.problem = f"No predictions: this model has no usable softmax ({e})."
    if out.softmax is not None:
        try:
            vocab = kept.vocabulary(emb, known, state)
        except ReadError as e:
            vocab, out.vocab_problem = None, str(e)
        state.report(1, 2, "predicting")
        out.result = in_context(emb, out.softmax, tokens, position, vocab, top_k=k).to_dict()
    if index_folder is not None:
        state.check()
        state.report(1, 2, f"searching {index_folder.name}")
        try:
            index = kept.index(index_folder, emb.checksum)
            vecs = query_vectors(emb, tokens, position, index.layers)
            for layer in index.layers:
                state.check()
                out.hits[layer] = [h.to_dict() for h in index.search(vecs[layer], layer, INDEX_K)]
            out.index_summary = corpus_index.summary(index)
        except CancelledError:
            raise
        except (ElmoError, OSError) as e:
            out.hits, out.index_problem = {}, str(e)
    return out
