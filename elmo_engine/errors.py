"""The engine's own exception types. Every message names what went wrong and where."""
from __future__ import annotations

import difflib
from collections import Counter
from pathlib import Path
from typing import Iterable, List, Optional, Sequence


class ElmoError(Exception):
    """Base class of every error the engine raises on purpose (bad files, bad input)."""


class CheckpointError(ElmoError):
    """A checkpoint that cannot be used: missing, corrupt, or not matching its options.

    Parameters
    ----------
    path : the file concerned
    message : what is wrong, in words a user understands
    dataset : the HDF5 dataset / tensor name concerned, if any
    expected, found : what was expected and what the file holds, if that applies
    """

    def __init__(self, path, message, dataset=None, expected=None, found=None):
        self.path = str(path)
        self.dataset = dataset
        self.expected = expected
        self.found = found
        parts = [f"{self.path}: {message}"]
        if dataset is not None:
            parts.append(f"dataset '{dataset}'")
        if expected is not None or found is not None:
            parts.append(f"expected {expected}, found {found}")
        super().__init__("; ".join(parts))


class InputError(ElmoError):
    """Bad user input: a malformed data file line, an unusable sentence, a bad argument.

    ``path`` and ``line`` (1-based) name the place when the input came from a file.
    """

    def __init__(self, message, path=None, line=None):
        self.path = None if path is None else str(path)
        self.line = line
        where = ""
        if self.path is not None:
            where = self.path + (f":{line}" if line is not None else "") + ": "
        elif line is not None:
            where = f"line {line}: "
        super().__init__(where + message)


class CancelledError(ElmoError):
    """Raised inside a job when its cancel flag was set; callers treat it as a clean stop."""


# ---- a word that does not occur ---------------------------------------------------------------
def suggestions(word: str, vocabulary: Iterable[str], n: int = 3) -> List[str]:
    """Words of ``vocabulary`` the user may have meant: other cases first, then near spellings
    (most frequent first among equals)."""
    counts = Counter(vocabulary)
    if not counts:
        return []
    folded = word.casefold()
    same_case = sorted((w for w in counts if w != word and w.casefold() == folded),
                       key=lambda w: -counts[w])
    by_folded: dict = {}
    for w in sorted(counts, key=lambda w: -counts[w]):
        by_folded.setdefault(w.casefold(), w)         # the most frequent spelling of each
    near = difflib.get_close_matches(folded, list(by_folded), n=n, cutoff=0.75)
    out = list(same_case)
    out += [by_folded[f] for f in near if by_folded[f] not in out and by_folded[f] != word]
    return out[:n]


def absent_word(word: str, tokens: Iterable[Sequence[str]], where: str,
                path: Optional[Path] = None, hint: str = "") -> InputError:
    """The error for a word that does not occur: ``'Bank' does not occur in …; did you mean
    'bank'?`` (exit status 1)."""
    found = suggestions(word, (t for s in tokens for t in s))
    msg = f"'{word}' does not occur in {where}"
    if found:
        msg += "; did you mean " + " or ".join(f"'{w}'" for w in found) + "?"
        if hint and any(w.casefold() == word.casefold() for w in found):
            msg += f" ({hint})"
    return InputError(msg, path=path)
