"""How a text file of the user's is read (plain Python), shared by the views that read one as
the commands do: the Corpus view's index build (``index``) and the Contexts view's reference text
(``contexts --reference``); :mod:`.reading_dialog` asks for it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict


@dataclass(frozen=True)
class CorpusReading:
    """How a text file of the user's is read, as the commands read it: tokenized as typed text
    or, ``pretokenized``, split on spaces only (``--pretokenized``: text already tokenized, such
    as WikiText, whose ``@-@`` stays one word); each line cut into sentences (``split_sentences``,
    the default of ``index`` and ``contexts --reference``) or one sentence per line
    (``--no-split-sentences``)."""

    pretokenized: bool = False
    split_sentences: bool = True

    def folder_suffix(self) -> str:
        """What the default folder's name adds for a reading other than the default
        (``-pretokenized``, ``-lines``), so that the same files read two ways are two indexes."""
        return ("-pretokenized" if self.pretokenized else "") + (
            "" if self.split_sentences else "-lines")

    def describe(self) -> str:
        """``"pretokenized, one sentence per line"``, or ``""`` for the default reading."""
        return ", ".join(t for t, on in (("pretokenized", self.pretokenized),
                                         ("one sentence per line", not self.split_sentences))
                         if on)

    def to_dict(self) -> Dict[str, bool]:
        return {"pretokenized": self.pretokenized, "split_sentences": self.split_sentences}

    @classmethod
    def from_dict(cls, d: object) -> "CorpusReading":
        """A remembered reading; what is not a bool is the default's."""
        d = d if isinstance(d, dict) else {}
        pre, split = d.get("pretokenized"), d.get("split_sentences")
        return cls(pre if isinstance(pre, bool) else cls.pretokenized,
                   split if isinstance(split, bool) else cls.split_sentences)
