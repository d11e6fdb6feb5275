"""Contexts: one word across the sentences it occurs in, per layer, and its contextual neighbours.

* :mod:`.compare` — per-layer cosine matrices, self-similarity, group separation, the CSV and
  the report tables;
* :mod:`.permutation` — the permutation test of within- against between-group similarity;
* :mod:`.groups` — group labels of a word's occurrences from ``group<TAB>sentence`` files;
* :mod:`.neighbours` — contextual nearest neighbours over a reference corpus, nearest words in
  layer 0; :mod:`.neighbour_corpus` — building those indexes and their cache.
"""
