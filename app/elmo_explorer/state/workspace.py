"""The shared state of the app: the model, the sentences, their activations, the selection.

Panels observe a :class:`Workspace` through its signals. Everything heavy (loading a checkpoint,
tokenizing, embedding) runs as a job on :attr:`Workspace.worker`; results are applied on the GUI
thread, and a result computed for an older set of sentences or an older model is dropped.

Invariants (GUI thread):

* ``len(sentences) == len(tokens) == len(activations)``;
* ``tokens[i]`` is final once ``activations[i]`` is not None (before that it may be ``[]`` while
  the line is being tokenized on the worker);
* ``activations[i]`` is a read-only ``(L+1, len(tokens[i]), 2P)`` float32 array of the current
model.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
from PySide6.QtCore import QObject, Signal

from elmo_explorer.state.worker import JobHandle, JobState, Lane, Worker
from elmo_engine.errors import CancelledError
from elmo_engine.progress import TaskState
from elmo_engine.model.tokenize import MAX_SENTENCE_TOKENS, MAX_TOKEN_CHARS, sentence_tokens

log = logging.getLogger(__name__)

CHUNK_TOKENS = 4096          # tokens per embedding chunk: partial results arrive this often
#: the request kind of the tokenize-and-embed job (one at a time; a newer one supersedes it)
EMBED = "embed"
TOKENIZE_CHUNK = 2000        # lines tokenized between cancel checks / partial deliveries
MAX_LINE_TOKENS = MAX_SENTENCE_TOKENS   # longer lines are cut here (with a message)
#: longer tokens (typed or pasted; files refuse them) are cut here, with a message: no model
#: reads more, and the views lay every token out as text (issue 44)
MAX_TOKEN_LENGTH = MAX_TOKEN_CHARS


@dataclass(frozen=True)
class TokenRef:
    """One token: sentence index and token index within it."""

    sentence: int
    token: int


@dataclass(frozen=True)
class ModelSpec:
    """What to load: a checkpoint path and where/how to run it."""

    path: str
    device: str = "auto"
    precision: str = "fp32"


class _SubState(TaskState):
    """Progress of one chunk mapped onto the whole job; cancel follows the parent."""

    def __init__(self, parent: TaskState, base: int, total: int):
        super().__init__()
        self._parent, self._base, self._total = parent, base, total

    @property
    def cancelled(self) -> bool:
        return self._parent.cancelled

    def check(self) -> None:
        self._parent.check()

    def cancel(self) -> None:
        self._parent.cancel()

    def report(self, done: int, total: int, message: str = "") -> None:
        d = self._base + done
        self._parent.report(d, self._total, f"embedding ({d:,}/{self._total:,} tokens)")


class Workspace(QObject):
    """Model, sentences, activations and selection, shared by all panels.

    Signals
    -------
    model_changed() : a new model is active (activations were reset)
    model_load_failed(str, str) : path, message — the previous model stays active
    sentences_changed() : the list of sentences changed
    tokenization_changed(str) : lines are split a new way ("tokenize" or "whitespace")
    tokens_changed() : some lines got their tokens
    activations_changed() : some activations became available
    selection_changed(object) : the selected :class:`TokenRef` or None
    busy_changed(bool) : the worker started / stopped having jobs
    message(str) : a warning for the status bar (e.g. a line was truncated)
    """

    model_changed = Signal()
    model_load_failed = Signal(str, str)
    sentences_changed = Signal()
    tokenization_changed = Signal(str)
    tokens_changed = Signal()
    activations_changed = Signal()
    selection_changed = Signal(object)
    busy_changed = Signal(bool)
    message = Signal(str)

    _warning = Signal(str)              # from the embedder, worker thread

    def __init__(self, worker: Optional[Worker] = None, parent: Optional[QObject] = None):
        super().__init__(parent)
        self.worker = worker if worker is not None else Worker(self)
        self.embedder = None
        self.model_info = None
        self.model_spec: Optional[ModelSpec] = None
        self.device_label = ""
        self.sentences: List[str] = []
        self.tokens: List[List[str]] = []
        self.activations: List[Optional[np.ndarray]] = []
        self.selection: Optional[TokenRef] = None
        #: sentence text → its group ("bank: river"), from a group<TAB>sentence file
        self.sentence_groups: Dict[str, str] = {}
        #: select the default word's first occurrence whenever nothing is selected and the
        #: tokens change (the app sets it, so that every view opens on one word and token)
        self.select_default = False
        #: how lines are split into tokens (``model.tokenize.TOKENIZATIONS``): typed text, or
        #: "whitespace" for text that is already tokenized (``--pretokenized``)
        self.tokenization = "tokenize"
        #: the selection and its word before a change of tokenization, selected again when
        #: its sentence's new tokens arrive (:meth:`_default_selection`)
        self._reselect: Optional[Tuple[TokenRef, str]] = None
        self._tok_cache: Dict[str, List[str]] = {}
        self._act_cache: Dict[str, np.ndarray] = {}
        self._loading: Optional[ModelSpec] = None
        self._warning.connect(self.message)
        self.worker.busy_changed.connect(self.busy_changed)
        #: the workspace's own jobs: loading the model, embedding the sentences, files
        self.jobs = self.worker.group("workspace", "Workspace")

    # ---- model ------------------------------------------------------------------------------
    def load_model(self, spec: ModelSpec) -> JobHandle:
        """Load a checkpoint on the worker (the long lane); on failure the current model stays
        active.

        Returns the job's handle. Emits ``model_changed`` or ``model_load_failed``.
        """
        import torch

        from elmo_engine.model.checkpoint import load_checkpoint
        from elmo_engine.embed.device import device_name, pick_device
        from elmo_engine.embed.embedder import Embedder
        from elmo_engine.runtime import usable_precision

        warn = self._warning.emit

        def job(state: TaskState):
            state.report(0, 1, f"loading {spec.path}")
            model = load_checkpoint(spec.path, progress=state.report)
            state.check()
            device = spec.device
            if device.startswith("cuda") and not torch.cuda.is_available():
                # a choice remembered on another machine (a shared settings folder) loaded
                # no model at all, not even the demo, and made the app forget the checkpoint
                warn("the GPU (CUDA) was asked for (Settings ▸ Device, or the workspace), but "
                     "this machine has none; running on the CPU")
                device = "cpu"
            precision, why = usable_precision(spec.precision, pick_device(device).type == "cuda")
            if why:
                warn(why)
            emb = Embedder(model, device=device, precision=precision, on_warning=warn)
            return emb, device_name(emb.device)

        self._loading = spec
        return self.jobs.submit(f"Loading model {spec.path}", job, kind="model",
                                  on_done=lambda r: self._on_model(spec, r),
                                  on_failed=lambda m: self._on_model_error(spec, m))

    def is_loading(self) -> bool:
        return self._loading is not None

    def _on_model(self, spec: ModelSpec, result: Tuple[Any, str]) -> None:
        self._loading = None
        self.embedder, self.device_label = result
        self.model_info = self.embedder.model.info
        device = spec.device                      # what ran: a GPU asked for may be the CPU
        if device.startswith("cuda") and self.embedder.device.type != "cuda":
            device = "cpu"
        self.model_spec = ModelSpec(spec.path, device, self.embedder.precision)
        self.jobs.invalidate(EMBED)                  # results of the old model are stale
        self._act_cache.clear()
        self.activations = [None] * len(self.sentences)
        self.selection = None
        self.model_changed.emit()
        self.selection_changed.emit(None)
        self._default_selection()
        self._schedule()

    def _on_model_error(self, spec: ModelSpec, message: str) -> None:
        self._loading = None
        self.model_load_failed.emit(spec.path, message)

    @property
    def n_layers(self) -> int:
        """Number of output layers L+1 of the current model (0 without a model)."""
        return 0 if self.model_info is None else self.model_info.options.n_output_layers

    # ---- sentences ----------------------------------------------------------------------------
    def set_sentences(self, sentences: Sequence[str]) -> None:
        """Replace the sentences; lines seen before keep their tokens and activations.

        Only lines whose text is new are tokenized and embedded (on the worker, after the
        current job of the "embed" group is cancelled).
        """
        sentences = [str(s) for s in sentences]
        self.jobs.invalidate(EMBED)                 # embeddings of the old lines are stale
        keep_tok = {s: self._tok_cache[s] for s in sentences if s in self._tok_cache}
        keep_act = {s: self._act_cache[s] for s in sentences if s in self._act_cache}
        self._tok_cache, self._act_cache = keep_tok, keep_act
        self.sentences = sentences
        self.tokens = [keep_tok.get(s, []) for s in sentences]
        self.activations = [keep_act.get(s) for s in sentences]
        if self.selection is not None and not self._valid(self.selection):
            self.selection = None
            self.selection_changed.emit(None)
        self.sentences_changed.emit()
        self._default_selection()
        self._schedule()

    def set_tokenization(self, tokenization: str, refresh: bool = True) -> None:
        """Split the lines as ``tokenization`` says from now on: every line is tokenized and
        embedded again (``refresh``; False: the caller sets new sentences next). The selected
        token's word stays selected in its sentence (at its place, else its first occurrence
        there) once that sentence's new tokens arrive."""
        from elmo_engine.model.tokenize import Tokenization

        tokenization = Tokenization.parse(tokenization).value    # ValueError for another name
        if tokenization == self.tokenization:
            return
        self.tokenization = tokenization
        self.tokenization_changed.emit(tokenization)
        if refresh and self.selection is not None and self._valid(self.selection):
            self._reselect = (self.selection, self.word_at(self.selection))
        self._tok_cache.clear()
        self._act_cache.clear()
        if refresh:
            self.set_sentences(list(self.sentences))

    def _schedule(self) -> None:
        """Submit one job that tokenizes and embeds every line still missing something."""
        if self.worker.is_stopped():
            return                                   # the app is quitting
        need_tok = [i for i, s in enumerate(self.sentences) if s not in self._tok_cache]
        need_act = [i for i, a in enumerate(self.activations) if a is None]
        if not need_tok and (self.embedder is None or not need_act):
            self.jobs.invalidate(EMBED)
            self.activations_changed.emit()
            return
        emb = self.embedder
        todo = sorted(set(need_tok) | (set(need_act) if emb is not None else set()))
        texts = [self.sentences[i] for i in todo]
        known = {i: self._tok_cache[self.sentences[i]] for i in todo
                 if self.sentences[i] in self._tok_cache}
        warn, how = self._warning.emit, self.tokenization

        def job(state: JobState) -> int:
            return _tokenize_and_embed(todo, texts, known, emb, state, state.post, warn, how)

        name = "Embedding sentences" if emb is not None else "Tokenizing sentences"
        # interactive: an edited line is embedded at once, even while a probe trains
        self.jobs.submit(name, job, lane=Lane.INTERACTIVE, kind=EMBED, on_event=self._on_partial)

    def _on_partial(self, items: list) -> None:
        """A chunk of tokenized / embedded lines of the current embed job (stale ones never
        arrive: the worker drops them)."""
        got_tokens = got_acts = False
        for i, toks, act in items:
            text = self.sentences[i]
            if text not in self._tok_cache:
                self._tok_cache[text] = toks
                got_tokens = True
            self.tokens[i] = toks
            if act is not None:
                act.setflags(write=False)
                self.activations[i] = act
                self._act_cache[text] = act
                got_acts = True
        if got_tokens:
            self.tokens_changed.emit()
            self._default_selection()
        if got_acts:
            self.activations_changed.emit()

    def all_embedded(self) -> bool:
        """True when a model is active and every sentence has its activations."""
        return self.embedder is not None and all(a is not None for a in self.activations)

    # ---- selection and lookup -----------------------------------------------------------------
    def _valid(self, ref: TokenRef) -> bool:
        return 0 <= ref.sentence < len(self.tokens) and 0 <= ref.token < len(self.tokens[ref.sentence])

    def default_token(self) -> Optional[TokenRef]:
        """The first occurrence of the default word (:func:`~elmo_explorer.state.words.
        default_word`: "bank" when present), or None without tokens."""
        from elmo_explorer.state.words import default_word

        word = default_word(self.tokens)
        found = self.occurrences(word) if word else []
        return found[0] if found else None

    def _default_selection(self) -> None:
        if self._reselect is not None:                # after a change of tokenization
            ref, word = self._reselect
            s, t = ref.sentence, ref.token
            if s < len(self.sentences) and not self.tokens[s] and self.sentences[s].strip():
                return                                # its new tokens are still to come
            self._reselect = None
            toks = self.tokens[s] if s < len(self.tokens) else []
            at = t if t < len(toks) and toks[t] == word else (
                toks.index(word) if word in toks else None)
            if at is not None:
                self.select(TokenRef(s, at))
                return
        if self.select_default and self.selection is None:
            self.select(self.default_token())

    def select(self, ref: Optional[TokenRef]) -> None:
        """Select a token (or None); emits ``selection_changed`` when it changes."""
        if ref is not None and not self._valid(ref):
            ref = None
        if ref == self.selection:
            return
        self.selection = ref
        self.selection_changed.emit(ref)

    def word_at(self, ref: TokenRef) -> str:
        """The token string at ``ref`` (IndexError when out of range)."""
        if not self._valid(ref):
            raise IndexError(f"no token {ref.token} in sentence {ref.sentence}")
        return self.tokens[ref.sentence][ref.token]

    def occurrences(self, word: str) -> List[TokenRef]:
        """Every place where ``word`` occurs as a token (exact match), in reading order."""
        return [TokenRef(i, j) for i, toks in enumerate(self.tokens)
                for j, t in enumerate(toks) if t == word]

    def vector(self, ref: TokenRef, layer: int) -> np.ndarray:
        """The ``(2P,)`` activation of one token at one layer (KeyError while pending)."""
        act = self.activations[ref.sentence]
        if act is None:
            raise KeyError(f"sentence {ref.sentence} is not embedded yet")
        return act[layer, ref.token]


def _tokenize_and_embed(todo: List[int], texts: List[str], known: Dict[int, List[str]], emb,
                        state: TaskState, deliver, warn, tokenization: str = "tokenize") -> int:
    """Worker side: tokenize the lines as ``tokenization`` says (deliver tokens), then embed
    them in chunks (deliver)."""
    limit = min(MAX_LINE_TOKENS, MAX_SENTENCE_TOKENS)
    toks: List[List[str]] = []
    fresh = []
    for k, (i, text) in enumerate(zip(todo, texts)):
        if k % TOKENIZE_CHUNK == 0:
            state.check()
            state.report(k, len(todo), f"tokenizing ({k:,}/{len(todo):,} lines)")
        t = known.get(i)
        if t is None:
            t = sentence_tokens(text, tokenization)
            if len(t) > limit:
                warn(f"line {i + 1} has {len(t):,} tokens; only the first {limit:,} are used")
                t = t[:limit]
            long = sum(len(w) > MAX_TOKEN_LENGTH for w in t)
            if long:
                warn(f"line {i + 1} has {long:,} token{'s' if long > 1 else ''} of more than "
                     f"{MAX_TOKEN_LENGTH:,} characters; each is cut to its first "
                     f"{MAX_TOKEN_LENGTH:,} (no model reads more)")
                t = [w[:MAX_TOKEN_LENGTH] for w in t]
            fresh.append((i, t, None))
            if len(fresh) >= TOKENIZE_CHUNK:
                deliver(fresh)
                fresh = []
        toks.append(t)
    if fresh:
        deliver(fresh)
    if emb is None:
        return 0
    total = sum(len(t) for t in toks)
    done = 0
    start = 0
    while start < len(todo):
        end, size = start, 0
        while end < len(todo) and (end == start or size + len(toks[end]) <= CHUNK_TOKENS):
            size += len(toks[end])
            end += 1
        state.check()
        arrays = emb.embed(toks[start:end], _SubState(state, done, total))
        deliver([(todo[k], toks[k], arrays[k - start]) for k in range(start, end)])
        done += size
        start = end
    if state.cancelled:
        raise CancelledError("cancelled")
    return total
