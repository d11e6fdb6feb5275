"""Projection of contextual token vectors to 2-D: per layer, PCA first, then UMAP; cached.

* :mod:`~elmo_engine.projection.tokens` — which tokens (:class:`TokenSet` and its builders);
* :mod:`~elmo_engine.projection.compute` — features, PCA, exact kNN, UMAP, :class:`Projector`
  (the cache) and :func:`warm_up` (compile umap's kernels once per process, off the GUI thread);
* :mod:`~elmo_engine.projection.export` — coordinates CSV and the TensorBoard projector pair.
"""
from elmo_engine.projection.compute import (MIN_UMAP_POINTS, LayerSpec, PcaResult, Projection,
                                            Projector, UmapParams, exact_knn, is_warm,
                                            layer_features, pca, umap_2d, warm_up)
from elmo_engine.projection.export import (coordinates_table, metadata_columns,
                                           write_coordinates_csv, write_tensorboard)
from elmo_engine.projection.tokens import (TokenSet, all_tokens, labelled_tokens, load_labelled,
                                           parse_word_list, word_tokens)

__all__ = ["MIN_UMAP_POINTS", "LayerSpec", "PcaResult", "Projection", "Projector", "TokenSet",
           "UmapParams", "all_tokens", "coordinates_table", "exact_knn", "is_warm",
           "labelled_tokens", "layer_features", "load_labelled", "metadata_columns",
           "parse_word_list", "pca", "umap_2d", "warm_up", "word_tokens",
           "write_coordinates_csv", "write_tensorboard"]
