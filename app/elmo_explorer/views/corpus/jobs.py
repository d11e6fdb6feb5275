"""What the Corpus view runs on the worker, without Qt: build (or resume) an index, search it by
an occurrence per layer, induce a word's senses, map a word's occurrences, list a map
selection's occurrences. Each function takes
values captured on the GUI thread and a :class:`~elmo_engine.progress.TaskState`."""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from elmo_engine.errors import InputError
from elmo_engine.progress import TaskState, check, report
from elmo_explorer.views.corpus.atlas import MapData, categories, project_layer
from elmo_explorer.views.corpus.model import ConcordanceLine, MapSelection, SELECTION_LINES
from elmo_engine.index.hits import Hit
from elmo_explorer.views.reading import CorpusReading

if TYPE_CHECKING:        # the index (numpy, torch) is imported by the jobs, on the worker
    from elmo_engine.index.corpus import CorpusReader
    from elmo_engine.index.search import CorpusIndex
    from elmo_engine.index.senses import SenseInduction
    from elmo_engine.index.store import Manifest

SHARD_SIZE = 500                     # sentences per shard: resuming loses at most this much


@dataclass(frozen=True)
class BuildRequest:
    """An index to build from the GUI thread's choices."""

    corpus: Tuple[Path, ...]
    folder: Path
    checkpoint: str
    #: the output layers to index; None: every one the model has (the token layer and each
    #: biLSTM layer: 0, 1, 2 for the published models)
    layers: Optional[Tuple[int, ...]] = None
    shard_size: int = SHARD_SIZE
    force: bool = False
    reading: CorpusReading = CorpusReading()


def read_corpus(paths: Sequence[Path], reading: CorpusReading = CorpusReading()) -> CorpusReader:
    """The corpus as ``elmo-explorer index`` reads it with the same options (by default: typed
    text tokenized as the app does, paragraphs split into sentences; always ``= … =`` headers
    skipped, over-long sentences cut), so an index the app builds and one the CLI builds from
    the same files are the same index; a stream, read anew at each pass (never held whole)."""
    from elmo_engine.index.corpus import CorpusReader

    return CorpusReader.of(paths, reading.pretokenized, reading.split_sentences)


def build_index(req: BuildRequest, embedder, state: TaskState,
                on_stage: Callable[[str], None] = lambda s: None) -> Manifest:
    """Embed ``req.corpus`` into ``req.folder`` (or resume a stopped build of the same corpus
    and model) with the engine's one-process build; progress in tokens with tokens/s and the
    time left, then the graphs' vectors."""
    from elmo_engine.embed.embedder import Embedder
    from elmo_engine.index.build import (build_index as engine_build, new_manifest,
                                         resumed_layers)

    n_layers = embedder.opts.n_output_layers
    resumed = None if req.layers is not None or req.force else \
        resumed_layers(req.folder, embedder.checksum)   # a stopped build: its own layers
    layers = resumed or (tuple(range(n_layers)) if req.layers is None else
                         tuple(v for v in req.layers if 0 <= v < n_layers))
    on_stage("reading the corpus")
    sentences = read_corpus(req.corpus, req.reading)
    from elmo_engine.index.corpus import count_corpus

    count = count_corpus(sentences, req.shard_size)
    if not count.n_sentences:
        raise InputError("no sentences in the corpus", path=req.corpus[0])
    wanted = new_manifest(embedder.model, req.checkpoint, count, layers, req.corpus,
                          sentences.reading(), embedder.precision)
    # a private embedder over the same model: no cache shared with the interactive lane; in the
    # app's precision (Settings ▸ Precision), which the model already runs in
    emb = Embedder(embedder.model, device=str(embedder.device), precision=embedder.precision,
                   token_budget=4096, cache_size=0)
    on_stage("embedding")
    from elmo_engine.index.ann import AnnSettings

    return engine_build(req.folder, sentences, wanted, emb, AnnSettings(), state, req.force,
                        count)


def open_index(folder: Path, checksum: Optional[str]) -> CorpusIndex:
    """A complete index, refused when built with another model than ``checksum``."""
    from elmo_engine.index.search import CorpusIndex

    return CorpusIndex(Path(folder), checksum)


def search_occurrence(index: CorpusIndex, vectors: Dict[int, np.ndarray], word: str, k: int,
                      same_word: bool, state: TaskState) -> Dict[int, List[Hit]]:
    """The ``k`` nearest occurrences of the query (its vector per layer) in every layer the
    index holds; the same word's occurrences only when ``same_word`` (exact search)."""
    out: Dict[int, List[Hit]] = {}
    for i, layer in enumerate(index.layers):
        if layer not in vectors:
            continue
        check(state)
        report(state, i, len(index.layers), f"searching layer {layer}")
        out[layer] = index.search(vectors[layer], layer, k, word if same_word else None)
    return out


def vectors_of_row(index: CorpusIndex, row: int) -> Dict[int, np.ndarray]:
    """An indexed occurrence's stored vector in every layer (float32)."""
    return {layer: np.asarray(index.vectors[layer][row], np.float32) for layer in index.layers}


def selection_lines(index: CorpusIndex, selection: MapSelection, state: TaskState,
                    limit: int = SELECTION_LINES) -> MapSelection:
    """``selection`` with the concordance lines of its first ``limit`` occurrences (corpus
    order) read from the token table."""
    rows = np.asarray(selection.rows[:limit], np.int64)
    lines = []
    for start in range(0, len(rows), 500):
        check(state)
        for row, sid, pos, word, text in index.tokens_at(rows[start:start + 500]):
            hit = Hit(int(sid), int(pos), word, float("nan"), text, selection.layer, int(row))
            lines.append(ConcordanceLine.from_hit(hit, len(lines) + 1))
    return replace(selection, lines=tuple(lines))


def induce(index: CorpusIndex, word: str, state: TaskState) -> SenseInduction:
    """``word``'s senses per layer, k from 2 to ``senses``'s most (``senses.K_MAX``)."""
    from elmo_engine.index.senses import induce_from_index

    return induce_from_index(index, word, state=state)


def map_word(index: CorpusIndex, word: Optional[str], senses: Optional[SenseInduction],
             max_points: int, state: TaskState, seed: int = 0) -> MapData:
    """The map of ``word``'s occurrences (None: every token), evenly sampled to ``max_points``,
    2-D PCA per layer. Coloured by induced sense (the top layer's clusters; every occurrence
    goes to the nearest cluster centre) for a word with senses, else by word."""
    if word is None:
        n_total = index.manifest.n_tokens
        rows = np.arange(n_total, dtype=np.int64)
    else:
        rows = index.rows_of(word)
        n_total = len(rows)
        if n_total == 0:
            raise InputError(f"'{word}' does not occur in the index", path=index.folder)
    if len(rows) > max_points:
        pick = np.random.default_rng(seed).choice(len(rows), max_points, replace=False)
        rows = rows[np.sort(pick)]
    coords, explained = {}, {}
    for i, layer in enumerate(index.layers):
        report(state, i, len(index.layers) + 1, f"projecting layer {layer} ({len(rows):,} points)")
        coords[layer], explained[layer] = project_layer(index.vectors[layer], rows, seed, state)
    report(state, len(index.layers), len(index.layers) + 1, "colouring")
    if word is not None and senses is not None and senses.layers:
        codes, legend = _sense_codes(index, rows, senses, state)
    else:
        words = _words_of(index, rows, state)
        codes, legend = categories(words)
    return MapData(word if word is not None else "all tokens", rows, coords, codes, legend,
                   explained, n_total)


def _sense_codes(index: CorpusIndex, rows: np.ndarray, senses: SenseInduction,
                 state: TaskState) -> Tuple[np.ndarray, list]:
    from elmo_explorer.views.palette import PALETTE

    top = senses.layers[-1]
    sample_rows = np.array([index.row_of(o.sentence_id, o.position)
                            for o in senses.occurrences], np.int64)
    vecs = index.vectors[top.layer]
    labels = np.asarray(top.labels)
    centres = np.stack([np.asarray(vecs[sample_rows[labels == c.label]], np.float32).mean(0)
                        for c in top.clusters])                                  # (C, D)
    codes = np.empty(len(rows), np.int32)
    for s in range(0, len(rows), 65536):
        check(state)
        x = np.asarray(vecs[rows[s:s + 65536]], np.float32)                      # (c, D)
        codes[s:s + len(x)] = np.argmax(x @ centres.T, axis=1)
    counts = np.bincount(codes, minlength=len(top.clusters))
    legend = [(f"sense {c.label + 1}: " + ", ".join(w for w, _ in c.context_words[:2]),
               PALETTE[c.label % len(PALETTE)], int(counts[i]))
              for i, c in enumerate(top.clusters)]
    return codes, legend


def _words_of(index: CorpusIndex, rows: np.ndarray, state: TaskState) -> List[str]:
    """The word of each row (case-folded), read in row order from the token table."""
    folded = index.folded_between(int(rows.min()), int(rows.max()), lambda: check(state))
    return [folded[int(r)] for r in rows]
