"""Splitting typed text into tokens.

Two modes: whitespace (pre-tokenized input, what every reference tool does) and a tokenizer for
typed text that follows the conventions of the 1B Word Benchmark / Penn Treebank text the
published models were trained on: punctuation split off, clitics split (``don't`` → ``do n't``,
``John's`` → ``John 's``), abbreviations and numbers kept whole (``U.S.``, ``3.14``, ``1,000``).
"""
from __future__ import annotations

import re
from enum import Enum
from typing import List, Optional

from elmo_engine.model.options import MAX_CHARACTERS_PER_TOKEN

#: the most tokens one sentence may have (the embedder refuses longer ones, with a message)
MAX_SENTENCE_TOKENS = 10_000
#: the most characters one token may have: the widest token a model reads (``options.json``'s
#: ``max_characters_per_token`` is at most 1,024). The readers of sentence files refuse a line
#: with a longer one (:func:`overlong_token`): the app lays every token out as text (tables,
#: labels, figures), and Qt and matplotlib take memory that grows with its length (a 1 MB line
#: of one letter and 500,000 combining marks, issue 44)
MAX_TOKEN_CHARS = MAX_CHARACTERS_PER_TOKEN
# Pieces, tried in order at each position. Every unbounded repetition either ends the piece or
# is followed only by a fixed set of characters (the URL's last character), so a failed try
# never rescans: a string of n characters is tokenized in O(n) (tests/engine/
# test_hostile_text_and_outputs.py walks the parsed pattern to check it). E-mail addresses are found
# outside the pattern (:func:`_email_ends`): ``[\w.+-]+@…`` tried at every position of a run of
# ``+ . - _`` rescanned the run to its end each time (quadratic, issue 25).
_MARKS = ("\u0300-\u036f\u0483-\u0489\u0591-\u05bd\u0610-\u061a\u064b-\u065f\u0900-\u0903"
          "\u093a-\u094f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe00-\ufe0f\ufe20-\ufe2f")
_URL = r"""(?:https?://|www\.)\S+[^\s.,;:!?'")\]]"""
_REST = r"""
    (?:[A-Za-z]\.){2,}                                  # U.S. / e.g. / U.S.A.
  | (?:Mr|Mrs|Ms|Dr|Prof|Sr|Jr|St|vs|etc|Inc|Ltd|Co|Corp|No|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)\.(?=\s|$)
  | \d+(?:[.,:/]\d+)*(?:%)?                             # 3.14  1,000  10:30  1/2
  | [nN]['’][tT]\b                                     # n't after a split
  | [^\W_](?:[^\W_]|[MARKS])*(?:[-'’](?=[^\W_])(?!(?:s|S|m|M|d|D|ll|LL|re|RE|ve|VE)\b)[^\W_](?:[^\W_]|[MARKS])*)*
  | '(?:s|S|m|M|d|D|ll|LL|re|RE|ve|VE)\b                # clitics after a split
  | ’(?:s|S|m|M|d|D|ll|LL|re|RE|ve|VE)\b
  | \.\.\.|--|``|''                                     # multi-char punctuation
  | \S                                                  # any other single character
    """.replace("MARKS", _MARKS)
#: the token pattern without e-mail addresses (a piece without "@" needs no more)
_TOKEN_RE = re.compile(_URL + "\n  | " + _REST, re.VERBOSE)
_URL_RE = re.compile(_URL)
_REST_RE = re.compile(_REST, re.VERBOSE)
#: the part of an e-mail address after its user name, tried once per "@"
_EMAIL_DOMAIN = re.compile(r"@[\w-]+(?:\.[\w-]+)+")
#: one character of an e-mail user name
_EMAIL_USER = re.compile(r"[\w.+-]")
_NT_SPLIT = re.compile(r"(?i)([^\W\d_])(n['’]t)\b")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u200b\u2028\u2029\ufeff]")


class Tokenization(str, Enum):
    """How a sentence's text is split into tokens: typed text through :func:`tokenize`, or text
    that is already tokenized (``--pretokenized``) on whitespace.

    One vocabulary for every file that records it: workspaces, ``layers --json``, a corpus
    index's manifest, a training run's config. A member is a ``str`` of its value, so it is
    written to JSON as ``"tokenize"`` or ``"whitespace"``; :meth:`parse` also reads ``"regex"``,
    the name index manifests, trainer configs and ``train-lm --tokenize`` used for typed text
    before this class (files written then still load, and resume against new ones)."""

    TYPED = "tokenize"
    WHITESPACE = "whitespace"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def of(cls, pretokenized: bool) -> "Tokenization":
        """The tokenization a ``--pretokenized`` flag (or a view's switch) names."""
        return cls.WHITESPACE if pretokenized else cls.TYPED

    @classmethod
    def parse(cls, value: object) -> "Tokenization":
        """``value`` as a member; ``"regex"`` is the older name of :attr:`TYPED`.

        Raises ValueError naming the accepted names for anything else."""
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            if value in _OLDER_NAMES:
                return _OLDER_NAMES[value]
            for member in cls:
                if member.value == value:
                    return member
        raise ValueError(f"tokenization must be one of {', '.join(TOKENIZATIONS)}, "
                         f"got {value!r}")

    def tokens(self, text: str, limit: Optional[int] = None) -> List[str]:
        """The tokens of one sentence (:func:`sentence_tokens`)."""
        if self is Tokenization.WHITESPACE:
            return _CONTROL.sub(" ", text).split()
        return tokenize(text, limit)


#: the names a file or a command may give (what :meth:`Tokenization.parse` accepts, less the
#: older ``"regex"``)
TOKENIZATIONS = tuple(t.value for t in Tokenization)
_OLDER_NAMES = {"regex": Tokenization.TYPED}


def sentence_tokens(text: str, tokenization: str = Tokenization.TYPED,
                    limit: Optional[int] = None) -> List[str]:
    """The tokens of one sentence: :func:`tokenize`'s, or for ``"whitespace"`` (text that is
    already tokenized) its whitespace-separated pieces, control characters blanked as
    :func:`tokenize` blanks them. ``limit`` as :func:`tokenize`'s (a longer list may come
    back; the caller cuts or refuses it). ValueError for an unknown tokenization."""
    return Tokenization.parse(tokenization).tokens(text, limit)


def whitespace_tokenize(text: str) -> List[str]:
    """Split on whitespace; the reference tools' tokenization."""
    return text.split()


def tokenize(text: str, limit: Optional[int] = None) -> List[str]:
    """Tokenize typed text the way the 1B Word Benchmark was tokenized; linear in the text's
    length. With ``limit``, stop once more than ``limit`` tokens are found (the caller refuses
    the sentence without tokenizing the rest).

    >>> tokenize("I don't think the U.S. will pay $1,000.")
    ['I', 'do', "n't", 'think', 'the', 'U.S.', 'will', 'pay', '$', '1,000', '.']
    """
    text = _CONTROL.sub(" ", text)
    tokens: List[str] = []
    # "don't" -> "do n't", "can't" -> "ca n't", "won't" -> "wo n't" (PTB convention)
    text = _NT_SPLIT.sub(r"\1 \2", text)
    for piece in text.split():
        if "@" in piece:
            tokens.extend(_with_emails(piece))
        else:
            tokens.extend(m.group(0) for m in _TOKEN_RE.finditer(piece))
        if limit is not None and len(tokens) > limit:
            break
    return tokens


def overlong_token(text: str, pretokenized: bool = False, limit: int = MAX_TOKEN_CHARS) -> int:
    """0 when every token of ``text`` (as :func:`tokenize` or, ``pretokenized``, whitespace
    splits it) has at most ``limit`` characters; else the length of one that has more (the
    longest of the first whitespace-separated piece holding one). A token never spans
    whitespace, so only pieces longer than ``limit`` are tokenized: ordinary text costs one
    ``split``."""
    for piece in text.split():
        if len(piece) > limit:
            if pretokenized:
                return len(piece)
            longest = max(len(t) for t in tokenize(piece))
            if longest > limit:
                return longest
    return 0


def _email_ends(piece: str) -> List[int]:
    r"""For every position ``i``: where an e-mail address starting at ``i`` ends (0: none).

    ``[\w.+-]+@[\w-]+(?:\.[\w-]+)+`` can only match from ``i`` when the run of user-name
    characters holding ``i`` ends at an "@" followed by a domain; one pass from the end finds the
    answer for every position of the run at once (linear, where the regex tried at each position
    rescanned the run)."""
    n = len(piece)
    ends = [0] * (n + 1)
    run_end = 0                  # the end of the address whose run we are in (0: none)
    for i in range(n - 1, -1, -1):
        c = piece[i]
        if _EMAIL_USER.match(c):
            ends[i] = run_end
        else:
            run_end = 0
            if c == "@":
                m = _EMAIL_DOMAIN.match(piece, i)
                run_end = m.end() if m else 0
    return ends


def _with_emails(piece: str) -> List[str]:
    """The tokens of one whitespace-free piece that holds an "@": the same as the pattern
    with its e-mail alternative (tried after URLs, before the rest) at every position."""
    ends = _email_ends(piece)
    out: List[str] = []
    pos, n = 0, len(piece)
    while pos < n:
        m = _URL_RE.match(piece, pos)
        if m is None and ends[pos]:
            out.append(piece[pos:ends[pos]])
            pos = ends[pos]
            continue
        if m is None:
            m = _REST_RE.match(piece, pos)
        assert m is not None, "_REST matches any character"
        out.append(m.group(0))
        pos = m.end()
    return out
