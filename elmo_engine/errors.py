"""The engine's own exception types. Every message names what went wrong and where."""
from __future__ import annotations


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
