"""The catalogue of the published English ELMo biLMs (``catalogue.json``, data not code).

The four models AllenNLP publishes for "Deep contextualized word representations" (Peters et al.,
NAACL 2018): ``small``, ``medium``, ``original`` and ``original-5.5b``, with the addresses of
their files under AllenNLP's base address, their parameter counts, sizes, training corpora and
memory needs, and where published, their softmax (output layer) and vocabulary. Sources are named
in the file and in ``docs/guide/models.md``. ``ELMO_EXPLORER_MODEL_MIRROR`` replaces the base
address (a mirror, or the tests' loopback server).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Dict, Optional, Tuple

from elmo_engine.errors import InputError

CATALOGUE_PATH = Path(__file__).with_name("catalogue.json")
CATALOGUE_FORMAT = "elmo-explorer-catalogue"
MIRROR_ENV = "ELMO_EXPLORER_MODEL_MIRROR"
_MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class CatalogueFile:
    """One published file: its path under the base address and what is known of its size.

    ``role`` is ``options``, ``weights``, ``softmax`` or ``vocab``; ``alternates`` are other
    paths under the base address that serve the same file (tried in order after a 404).
    """

    role: str
    path: str
    size_bytes: Optional[int]
    size_exact: bool
    size_source: str
    alternates: Tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """The file's name (as stored on disk)."""
        return self.path.rsplit("/", 1)[-1]

    def urls(self, base: Optional[str] = None) -> Tuple[str, ...]:
        root = (base or base_url()).rstrip("/") + "/"
        return tuple(root + p for p in (self.path, *self.alternates))


@dataclass(frozen=True)
class PublishedSoftmax:
    vocab_size: int
    vocab_size_source: str
    files: Tuple[CatalogueFile, ...]


@dataclass(frozen=True)
class PublishedModel:
    """One catalogue entry."""

    name: str
    label: str
    folder: str
    architecture: str
    parameters: int
    parameters_source: str
    corpus: str
    corpus_source: str
    output_dim: int
    files: Tuple[CatalogueFile, ...]
    softmax: Optional[PublishedSoftmax]
    memory_bytes: int
    memory_with_softmax_bytes: Optional[int]
    memory_source: str

    def files_for(self, with_softmax: bool) -> Tuple[CatalogueFile, ...]:
        if with_softmax and self.softmax is not None:
            return self.files + self.softmax.files
        return self.files

    def download_bytes(self, with_softmax: bool = False) -> int:
        """The approximate download size (files of unknown size count 0)."""
        return sum(f.size_bytes or 0 for f in self.files_for(with_softmax))

    def file(self, role: str) -> CatalogueFile:
        for f in self.files_for(True):
            if f.role == role:
                return f
        raise KeyError(role)


@dataclass(frozen=True)
class Catalogue:
    base_url: str
    sources: Dict[str, str]
    models: Tuple[PublishedModel, ...]

    def names(self) -> Tuple[str, ...]:
        return tuple(m.name for m in self.models)

    def get(self, name: str) -> Optional[PublishedModel]:
        return next((m for m in self.models if m.name == name), None)

    def require(self, name: str) -> PublishedModel:
        """The model named ``name``, or an :class:`InputError` listing the names."""
        model = self.get(name)
        if model is None:
            raise InputError(f"'{name}' is not a published model; the catalogue has "
                             + ", ".join(self.names()))
        return model


def base_url() -> str:
    """AllenNLP's base address, or ``ELMO_EXPLORER_MODEL_MIRROR`` when it is set."""
    mirror = os.environ.get(MIRROR_ENV, "").strip()
    if mirror:
        if not mirror.lower().startswith(("http://", "https://")):
            raise InputError(f"{MIRROR_ENV}={mirror!r} is not an http:// or https:// address")
        return mirror.rstrip("/") + "/"
    return load_catalogue().base_url


@lru_cache(maxsize=None)
def load_catalogue(path: Optional[Path] = None) -> Catalogue:
    """Read and check the catalogue (the bundled one unless ``path`` is given)."""
    path = Path(path) if path is not None else CATALOGUE_PATH
    try:
        if path.stat().st_size > _MAX_BYTES:
            raise InputError("the catalogue is larger than 1 MiB", path=path)
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise InputError(f"cannot read the model catalogue ({e})", path=path) from None
    try:
        if data.get("format") != CATALOGUE_FORMAT or data.get("version") != 1:
            raise ValueError(f"not a version 1 {CATALOGUE_FORMAT} file")
        models = tuple(_model(m) for m in data["models"])
        if len({m.name for m in models}) != len(models):
            raise ValueError("two models share a name")
        return Catalogue(base_url=str(data["base_url"]), sources=dict(data.get("sources", {})),
                         models=models)
    except (KeyError, TypeError, ValueError) as e:
        raise InputError(f"malformed model catalogue ({type(e).__name__}: {e})",
                         path=path) from None


def _file(d: dict) -> CatalogueFile:
    path = str(d["path"])
    if path.startswith("/") or ".." in path.split("/") or "\\" in path:
        raise ValueError(f"unsafe file path {path!r}")
    size = d.get("size_bytes")
    return CatalogueFile(role=str(d["role"]), path=path,
                         size_bytes=None if size is None else int(size),
                         size_exact=bool(d.get("size_exact", False)),
                         size_source=str(d.get("size_source", "")),
                         alternates=tuple(str(a) for a in d.get("alternates", ())))


def _model(d: dict) -> PublishedModel:
    files = tuple(_file(f) for f in d["files"])
    if sorted(f.role for f in files) != ["options", "weights"]:
        raise ValueError(f"model {d.get('name')!r} must list one options and one weights file")
    sm = d.get("softmax")
    softmax = None
    if sm is not None:
        softmax = PublishedSoftmax(vocab_size=int(sm["vocab_size"]),
                                   vocab_size_source=str(sm.get("vocab_size_source", "")),
                                   files=tuple(_file(f) for f in sm["files"]))
        if sorted(f.role for f in softmax.files) != ["softmax", "vocab"]:
            raise ValueError(f"model {d['name']!r}: a softmax lists one softmax and one vocab file")
    mem_sm = d.get("memory_with_softmax_bytes")
    return PublishedModel(
        name=str(d["name"]), label=str(d["label"]), folder=str(d["folder"]),
        architecture=str(d["architecture"]), parameters=int(d["parameters"]),
        parameters_source=str(d["parameters_source"]), corpus=str(d["corpus"]),
        corpus_source=str(d["corpus_source"]), output_dim=int(d["output_dim"]), files=files,
        softmax=softmax, memory_bytes=int(d["memory_bytes"]),
        memory_with_softmax_bytes=None if mem_sm is None else int(mem_sm),
        memory_source=str(d["memory_source"]))
