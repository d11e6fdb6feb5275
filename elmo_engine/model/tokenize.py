"""Splitting typed text into tokens.

Two modes: whitespace (pre-tokenized input, what every reference tool does) and a tokenizer for
typed text that follows the conventions of the 1B Word Benchmark / Penn Treebank text the
published models were trained on: punctuation split off, clitics split (``don't`` → ``do n't``,
``John's`` → ``John 's``), abbreviations and numbers kept whole (``U.S.``, ``3.14``, ``1,000``).
"""
from __future__ import annotations

import re
from typing import List

#: the most tokens one sentence may have (the embedder refuses longer ones, with a message)
MAX_SENTENCE_TOKENS = 10_000
# Pieces, tried in order at each position.
_MARKS = "\u0300-\u036f\u0483-\u0489\u0591-\u05bd\u0610-\u061a\u064b-\u065f\u0900-\u0903\u093a-\u094f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe00-\ufe0f\ufe20-\ufe2f"
_TOKEN_RE = re.compile(
    r"""
    (?:https?://|www\.)\S+[^\s.,;:!?'")\]]             # URLs
  | [\w.+-]+@[\w-]+(?:\.[\w-]+)+                        # e-mail addresses
  | (?:[A-Za-z]\.){2,}                                  # U.S. / e.g. / U.S.A.
  | (?:Mr|Mrs|Ms|Dr|Prof|Sr|Jr|St|vs|etc|Inc|Ltd|Co|Corp|No|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)\.(?=\s|$)
  | \d+(?:[.,:/]\d+)*(?:%)?                             # 3.14  1,000  10:30  1/2
  | [nN]['’][tT]\b                                     # n't after a split
  | [^\W_](?:[^\W_]|[MARKS])*(?:[-'’](?=[^\W_])(?!(?:s|S|m|M|d|D|ll|LL|re|RE|ve|VE)\b)[^\W_](?:[^\W_]|[MARKS])*)*
  | '(?:s|S|m|M|d|D|ll|LL|re|RE|ve|VE)\b                # clitics after a split
  | ’(?:s|S|m|M|d|D|ll|LL|re|RE|ve|VE)\b
  | \.\.\.|--|``|''                                     # multi-char punctuation
  | \S                                                  # any other single character
    """.replace("MARKS", _MARKS),
    re.VERBOSE,
)
_NT_SPLIT = re.compile(r"(?i)([^\W\d_])(n['’]t)\b")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u200b\u2028\u2029\ufeff]")


def whitespace_tokenize(text: str) -> List[str]:
    """Split on whitespace; the reference tools' tokenization."""
    return text.split()


def tokenize(text: str) -> List[str]:
    """Tokenize typed text the way the 1B Word Benchmark was tokenized.

    >>> tokenize("I don't think the U.S. will pay $1,000.")
    ['I', 'do', "n't", 'think', 'the', 'U.S.', 'will', 'pay', '$', '1,000', '.']
    """
    text = _CONTROL.sub(" ", text)
    tokens: List[str] = []
    # "don't" -> "do n't", "can't" -> "ca n't", "won't" -> "wo n't" (PTB convention)
    text = _NT_SPLIT.sub(r"\1 \2", text)
    for piece in text.split():
        tokens.extend(m.group(0) for m in _TOKEN_RE.finditer(piece))
    return tokens
