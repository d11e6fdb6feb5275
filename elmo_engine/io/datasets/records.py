"""The records every reader returns: a labelled sentence, and word-sense instances in a sentence."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple


@dataclass(frozen=True)
class LabelledSentence:
    """One pre-tokenized sentence with one label (or ``None``) per token.

    Attributes
    ----------
    tokens : the words fed to the model, in order
    labels : one per token; ``None`` means "not a target" (no label to learn or score)
    meta : reader-specific facts (``path``, ``line`` where the sentence starts, ``sent_id`` …);
        not part of equality or hashing
    """

    tokens: Tuple[str, ...]
    labels: Tuple[Optional[str], ...]
    meta: Dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        if len(self.tokens) != len(self.labels):
            raise ValueError(f"{len(self.tokens)} tokens but {len(self.labels)} labels")

    def __len__(self) -> int:
        return len(self.tokens)

    def targets(self) -> Tuple[Tuple[int, str], ...]:
        """``(index, label)`` of every token that has a label."""
        return tuple((i, lab) for i, lab in enumerate(self.labels) if lab is not None)


@dataclass(frozen=True)
class WsdInstance:
    """One sense-annotated (or to-be-annotated) word in a :class:`WsdSentence`.

    Attributes
    ----------
    id : the instance id of the XML (``d000.s000.t000``), the key file's first field
    start, stop : the token span ``tokens[start:stop]`` (multiword expressions such as
        "took place" span several tokens; most instances have ``stop == start + 1``)
    lemma : the lemma as written in the XML (``take_place``)
    pos : the universal POS tag of the XML (``NOUN``, ``VERB``, ``ADJ``, ``ADV``)
    keys : gold WordNet sense keys (empty when no key file was given or it has no line for it)
    candidates : the lemma's WordNet senses for this POS in sense-number order (first = most
        frequent sense); empty when no WordNet was given or the lemma is not in it
    """

    id: str
    start: int
    stop: int
    lemma: str
    pos: str
    keys: Tuple[str, ...] = ()
    candidates: Tuple[str, ...] = ()

    @property
    def index(self) -> int:
        """The token index of the instance (its first token)."""
        return self.start


@dataclass(frozen=True)
class WsdSentence:
    """A sentence of the WSD framework: its tokens and its instances.

    Attributes
    ----------
    id : the sentence id (``d000.s000``)
    tokens : the words fed to the model; a multiword ``<wf>``/``<instance>`` is split on spaces
    instances : the sense-annotated words, in order
    meta : ``path``, ``line``, ``text_id`` …; not part of equality
    """

    id: str
    tokens: Tuple[str, ...]
    instances: Tuple[WsdInstance, ...]
    meta: Dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def to_labelled(self) -> LabelledSentence:
        """The sentence with each instance's first gold key on its first token, ``None``
        elsewhere."""
        labels: list = [None] * len(self.tokens)
        for inst in self.instances:
            if inst.keys:
                labels[inst.start] = inst.keys[0]
        return LabelledSentence(self.tokens, tuple(labels), dict(self.meta, sent_id=self.id))
