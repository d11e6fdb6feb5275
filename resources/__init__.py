"""The bundled data files: the demo model, the demo sentences and the demo probe tasks.

This folder is installed as the package ``elmo_engine.resources`` (``pyproject.toml``
``package-dir``), so the files are found next to this module both in a source checkout and in
an installed copy; it holds no other code.
"""
from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
DEMO_DIR = "demo_model"
DEMO_FILES = ("options.json", "lm_weights.hdf5")


def demo_checkpoint_path() -> Path:
    """The folder of the bundled demo biLM (``options.json`` + ``lm_weights.hdf5``).

    When its files are missing (a broken installation), loading it gives a clear "no such
    file" error naming the place.
    """
    return HERE / DEMO_DIR


def demo_checkpoint_available() -> bool:
    """True when the demo model's files are installed."""
    folder = demo_checkpoint_path()
    return all((folder / name).is_file() for name in DEMO_FILES)


def demo_sentences_path() -> Path:
    """The demo sentences with their groups (``group<TAB>sentence``: "bank: river", "play:
    game" …; read them with ``elmo_engine.io.datasets.sentences.read_grouped_sentences``)."""
    return HERE / "demo_sentences.tsv"


def reference_set_files() -> tuple:
    """The bundled reference set's running text, for a corpus index (the Corpus view's default
    index): ``reference_corpus/sentences.txt`` (4,000 general sentences) and
    ``reference_corpus/word_contexts.tsv`` (a few hundred sentences of each demo word, read as
    the text after the last tab). ``word_senses.tsv`` adds the demo words' SemCor sentences with
    their senses for the Projection view (:mod:`elmo_engine.analysis.projection.tokens`)."""
    folder = HERE / "reference_corpus"
    return (folder / "sentences.txt", folder / "word_contexts.tsv")


def demo_tasks_dir() -> Path:
    """The folder of the built-in demo probe tasks (``pos``, ``wsd``, ``supersense``)."""
    return HERE / "demo_tasks"


def demo_model_attribution() -> str:
    """The bundled model's attribution (its training corpora), shown by Help → About; empty when
    the file is missing."""
    path = HERE / DEMO_DIR / "ATTRIBUTION.txt"
    try:
        return path.read_text("utf-8").strip()
    except OSError:
        return ""


def probe_reference_dir() -> Path:
    """The recorded reference probe results of the bundled model (``*.json``, ``README.md``)."""
    return HERE / "probe_reference"


def minimal_pairs_folder() -> Path:
    """The bundled minimal-pair sets (``*.tsv``: ``set<TAB>good<TAB>bad``, written for this
    project; :mod:`elmo_engine.analysis.language_model.pairs`)."""
    return HERE / "minimal_pairs"
