"""A corpus index of contextual vectors: build it once, search it by example, induce senses.

* :mod:`.store` — the folder's layout, manifest and shards (float16 vectors, SQLite tokens);
* :mod:`.build` — embedding shard by shard (resumable, ``torchrun``-parallel), joining, merging;
* :mod:`.ann` — the per-layer HNSW index (faiss);
* :mod:`.search` — nearest occurrences of a word in context (:class:`~.search.Hit`);
* :mod:`.senses` — per-layer sense induction over a word's occurrences;
* :mod:`.wsd_nn` — Peters et al. 2018 §5.3 nearest-neighbour word sense disambiguation;
* :mod:`.dist` — rank and world size under ``torchrun``.

The package sits above ``embed`` and ``io`` and imports no Qt: the app's Corpus view calls these
functions from a worker with a :class:`~elmo_engine.progress.TaskState`.
"""

#: the manifest that makes a folder an index, and what a folder without one is told
MANIFEST = "index.json"
NOT_AN_INDEX = "is not a corpus index (no index.json); build one with 'elmo-explorer index'"
