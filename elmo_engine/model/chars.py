"""Tokens → ELMo character ids and sentence framing (docs/checkpoint-format.md §4, §5).

Ids are as fed to the model: UTF-8 byte b → b+1; 257 <S>, 258 </S>, 259 begin-of-word,
260 end-of-word, 261 character padding; a row of zeros is a padding token.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Sequence

import numpy as np

BOS_CHAR = 257
EOS_CHAR = 258
BOW_CHAR = 259
EOW_CHAR = 260
PAD_CHAR = 261
BOS_TOKEN = "<S>"
EOS_TOKEN = "</S>"
#: the softmax vocabulary's unknown word (:mod:`elmo_engine.model.softmax`)
UNK_TOKEN = "<UNK>"


def _framed(body: Sequence[int], max_chars: int) -> tuple:
    ids = [BOW_CHAR, *body, EOW_CHAR]
    ids += [PAD_CHAR] * (max_chars - len(ids))
    return tuple(ids)


#: the char-id tuples kept (about 570 bytes each with the cache's own entry: ≤ 29 MB; the most
#: recent words of a Zipfian text, which most of its tokens are; a bigger cache grew with the
#: vocabulary of a streamed input, 115 MB at 200,000)
CHAR_IDS_CACHE = 50_000


@lru_cache(maxsize=CHAR_IDS_CACHE)
def token_to_char_ids(token: str, max_chars: int = 50) -> tuple:
    """The ``max_chars`` character ids of one token (a tuple of ints).

    ``"<S>"`` and ``"</S>"`` map to the sentence-boundary ids (AllenNLP's rule). Only the first
    ``max_chars - 2`` UTF-8 bytes are kept; lone surrogates are dropped.
    """
    if token == BOS_TOKEN:
        return _framed([BOS_CHAR], max_chars)
    if token == EOS_TOKEN:
        return _framed([EOS_CHAR], max_chars)
    data = token.encode("utf-8", errors="ignore")[: max_chars - 2]
    return _framed([b + 1 for b in data], max_chars)


def char_ids_for_types(types: Sequence[str], max_chars: int = 50) -> np.ndarray:
    """``(len(types), max_chars)`` int64 ids, one row per token string."""
    out = np.empty((len(types), max_chars), dtype=np.int64)
    for i, t in enumerate(types):
        out[i] = token_to_char_ids(t, max_chars)
    return out


def batch_to_ids(sentences: Sequence[Sequence[str]], max_chars: int = 50,
                 add_boundaries: bool = True) -> np.ndarray:
    """``(B, T, max_chars)`` ids for a batch; ``T`` = longest sentence (+2 with boundaries).

    Rows are padded on the right with all-zero rows (padding tokens).
    """
    extra = 2 if add_boundaries else 0
    t_max = max((len(s) for s in sentences), default=0) + extra
    out = np.zeros((len(sentences), t_max, max_chars), dtype=np.int64)
    for r, sent in enumerate(sentences):
        toks = [BOS_TOKEN, *sent, EOS_TOKEN] if add_boundaries else list(sent)
        for t, tok in enumerate(toks):
            out[r, t] = token_to_char_ids(tok, max_chars)
    return out
