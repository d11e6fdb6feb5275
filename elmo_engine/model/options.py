"""The biLM hyperparameters (``options.json``), parsed and checked.

See ``docs/checkpoint-format.md`` §2 for every key. Unknown top-level keys (training
left-overs such as ``n_tokens_vocab``) are kept in ``extra`` and otherwise ignored.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

from elmo_engine.errors import CheckpointError

MAX_OPTIONS_BYTES = 1 << 20  # an options file is a few hundred bytes; refuse megabytes of JSON
MAX_DEPTH = 64               # layers / highway layers (published models have 1-2)
MAX_FILTERS = 1024           # convolutions in the char-CNN (published models have 7)
#: characters per token (published models: 50). Memory for a batch grows with it (character ids
#: and the char-CNN's windows per token type), so it is bounded; the weights bound it from below
#: (no convolution may be wider than a token, and their widths are checked against the file)
MAX_CHARACTERS_PER_TOKEN = 1024


@dataclass(frozen=True)
class BiLMOptions:
    """Architecture of an ELMo biLM (character input).

    Attributes follow the published names: ``filters`` is a tuple of ``(width, count)``;
    ``projection_dim`` is P, ``lstm_dim`` is D, ``n_layers`` is L.
    """

    filters: tuple
    char_embed_dim: int = 16
    n_highway: int = 2
    max_characters_per_token: int = 50
    n_characters: int = 262
    activation: str = "relu"
    projection_dim: int = 512
    lstm_dim: int = 4096
    n_layers: int = 2
    cell_clip: Optional[float] = 3.0
    proj_clip: Optional[float] = 3.0
    use_skip_connections: bool = True
    extra: dict = field(default_factory=dict, compare=False)

    # ---- derived -------------------------------------------------------------------------
    @property
    def n_filters(self) -> int:
        """N, the width of the char-CNN output."""
        return sum(int(k) for _, k in self.filters)

    @property
    def has_token_projection(self) -> bool:
        return self.n_filters != self.projection_dim

    @property
    def has_lstm_projection(self) -> bool:
        return self.projection_dim < self.lstm_dim

    @property
    def output_dim(self) -> int:
        """Width of each LSTM direction's output (P, or D when there is no projection)."""
        return self.projection_dim if self.has_lstm_projection else self.lstm_dim

    @property
    def token_dim(self) -> int:
        return self.projection_dim

    @property
    def n_output_layers(self) -> int:
        return self.n_layers + 1

    # ---- (de)serialisation ---------------------------------------------------------------
    def to_json_dict(self) -> dict:
        """The published ``options.json`` layout (plus any training keys kept in ``extra``)."""
        d = dict(self.extra)
        d["char_cnn"] = {
            "activation": self.activation,
            "embedding": {"dim": self.char_embed_dim},
            "filters": [[int(w), int(k)] for w, k in self.filters],
            "max_characters_per_token": self.max_characters_per_token,
            "n_characters": self.n_characters,
            "n_highway": self.n_highway,
        }
        d["lstm"] = {
            "cell_clip": self.cell_clip,
            "dim": self.lstm_dim,
            "n_layers": self.n_layers,
            "proj_clip": self.proj_clip,
            "projection_dim": self.projection_dim,
            "use_skip_connections": self.use_skip_connections,
        }
        return d

    def describe(self) -> dict:
        d = asdict(self)
        d.pop("extra")
        d["filters"] = [list(f) for f in self.filters]
        return d

    @classmethod
    def from_json_dict(cls, d: Any, path="options.json") -> "BiLMOptions":
        """Build from a parsed ``options.json``; raise :class:`CheckpointError` naming the key."""
        if not isinstance(d, dict):
            raise CheckpointError(path, "options must be a JSON object", expected="object",
                                  found=type(d).__name__)
        cc = _get(d, "char_cnn", dict, path)
        ls = _get(d, "lstm", dict, path)
        filters_raw = _get(cc, "filters", list, path, "char_cnn.filters")
        if not filters_raw:
            raise CheckpointError(path, "char_cnn.filters is empty")
        if len(filters_raw) > MAX_FILTERS:
            raise CheckpointError(path, "char_cnn.filters lists implausibly many convolutions",
                                  expected=f"<= {MAX_FILTERS}", found=len(filters_raw))
        filters = []
        for i, f in enumerate(filters_raw):
            if (not isinstance(f, (list, tuple)) or len(f) != 2
                    or not all(_is_int(v) and v > 0 for v in f)):
                raise CheckpointError(path, f"char_cnn.filters[{i}] must be [width, count] with "
                                      "positive integers", found=_show(f))
            filters.append((int(f[0]), _pos_int(f[1], path, f"char_cnn.filters[{i}] count")))
        emb = _get(cc, "embedding", dict, path, "char_cnn.embedding")
        m = _pos_int(cc.get("max_characters_per_token", 50), path, "char_cnn.max_characters_per_token")
        if m < 3:                    # <S> and </S> are 3 ids: begin-of-word, the mark, end
            raise CheckpointError(path, "char_cnn.max_characters_per_token is too small for "
                                  "the sentence marks (begin-of-word, mark, end-of-word)",
                                  expected=">= 3", found=_show(m))
        if m > MAX_CHARACTERS_PER_TOKEN:
            raise CheckpointError(path, "char_cnn.max_characters_per_token is implausibly large",
                                  expected=f"<= {MAX_CHARACTERS_PER_TOKEN}", found=_show(m))
        for w, _ in filters:
            if w > m:
                raise CheckpointError(path, "a convolution is wider than the token",
                                      expected=f"width <= {m}", found=_show(w))
        activation = cc.get("activation", "relu")
        if activation not in ("relu", "tanh"):
            raise CheckpointError(path, "char_cnn.activation must be 'relu' or 'tanh'",
                                  found=_show(activation))
        n_chars = _pos_int(cc.get("n_characters", 262), path, "char_cnn.n_characters")
        if n_chars not in (261, 262):
            raise CheckpointError(path, "char_cnn.n_characters must be 262 (261 while training)",
                                  expected=262, found=n_chars)
        n_highway = cc.get("n_highway", 0)
        if n_highway is None:
            n_highway = 0
        if not _is_int(n_highway) or not 0 <= n_highway <= MAX_DEPTH:
            raise CheckpointError(path, "char_cnn.n_highway must be an integer from 0 to "
                                  f"{MAX_DEPTH}", found=_show(n_highway))
        n_layers = _pos_int(ls.get("n_layers", 1), path, "lstm.n_layers")
        if n_layers > MAX_DEPTH:
            raise CheckpointError(path, "lstm.n_layers is implausibly large",
                                  expected=f"<= {MAX_DEPTH}", found=n_layers)
        skip = ls.get("use_skip_connections", False)
        if skip is None:
            skip = False
        if not isinstance(skip, bool):
            raise CheckpointError(path, "lstm.use_skip_connections must be true or false",
                                  found=_show(skip))
        p_dim = _pos_int(ls.get("projection_dim"), path, "lstm.projection_dim")
        d_dim = _pos_int(ls.get("dim"), path, "lstm.dim")
        if p_dim > d_dim:            # the LSTM projects its D-wide state down to P (or not at all)
            raise CheckpointError(path, "lstm.projection_dim is larger than lstm.dim: the LSTM "
                                  "projects its cell state down to projection_dim",
                                  expected=f"<= {d_dim}", found=p_dim)
        extra = {k: v for k, v in d.items() if k not in ("char_cnn", "lstm")}
        return cls(
            filters=tuple(filters),
            char_embed_dim=_pos_int(emb.get("dim"), path, "char_cnn.embedding.dim"),
            n_highway=int(n_highway),
            max_characters_per_token=m,
            n_characters=262,
            activation=activation,
            projection_dim=_pos_int(ls.get("projection_dim"), path, "lstm.projection_dim"),
            lstm_dim=_pos_int(ls.get("dim"), path, "lstm.dim"),
            n_layers=n_layers,
            cell_clip=_clip(ls.get("cell_clip"), path, "lstm.cell_clip"),
            proj_clip=_clip(ls.get("proj_clip"), path, "lstm.proj_clip"),
            use_skip_connections=skip,
            extra=extra,
        )

    @classmethod
    def from_file(cls, path) -> "BiLMOptions":
        path = Path(path)
        from elmo_engine.files import read_bounded, regular_file_problem

        problem = regular_file_problem(path)        # a FIFO or a device is refused, not read
        if problem:
            raise CheckpointError(path, problem)
        try:
            size = path.stat().st_size
            if size > MAX_OPTIONS_BYTES:
                raise CheckpointError(path, "options file is too large to be an ELMo options.json",
                                      expected=f"<= {MAX_OPTIONS_BYTES} bytes", found=size)
            raw = read_bounded(path, MAX_OPTIONS_BYTES)
        except ValueError:                          # grew past the limit since the stat
            raise CheckpointError(path, "options file is too large to be an ELMo options.json",
                                  expected=f"<= {MAX_OPTIONS_BYTES} bytes") from None
        except OSError as e:
            raise CheckpointError(path, f"cannot read options file ({e.strerror or e})") from None
        from elmo_engine.files import utf8_text

        try:
            text = utf8_text(raw, bom=True)          # a BOM (Windows editors) is dropped
        except ValueError as e:
            raise CheckpointError(path, f"options file: {e}") from None
        try:
            d = json.loads(text)
        except json.JSONDecodeError as e:
            raise CheckpointError(path, f"options file is not valid JSON: {e.msg} at line "
                                  f"{e.lineno} column {e.colno}") from None
        except RecursionError:
            raise CheckpointError(path, "options file is nested too deeply") from None
        except ValueError as e:                      # e.g. an integer of thousands of digits
            raise CheckpointError(path, f"options file has an unreadable value ({e})") from None
        return cls.from_json_dict(d, path)


def _show(v):
    """A value from the file as it goes into a message: short values as they are, long ones
    (a 5,000-digit number, a nested structure) cut to a readable length."""
    text = repr(v)
    return v if len(text) <= 120 else f"{text[:100]}… ({len(text)} characters)"


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _get(d, key, typ, path, name=None):
    name = name or key
    if key not in d:
        raise CheckpointError(path, f"missing key '{name}'")
    v = d[key]
    if not isinstance(v, typ):
        raise CheckpointError(path, f"key '{name}' has the wrong type", expected=typ.__name__,
                              found=type(v).__name__)
    return v


def _pos_int(v, path, name) -> int:
    if not _is_int(v) or v <= 0:
        raise CheckpointError(path, f"'{name}' must be a positive integer", found=_show(v))
    if v > 1 << 20:
        raise CheckpointError(path, f"'{name}' is implausibly large", expected="<= 1048576",
                              found=_show(v))
    return int(v)


def _clip(v, path, name) -> Optional[float]:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
        raise CheckpointError(path, f"'{name}' must be a positive number or null",
                              found=_show(v))
    return float(v)
