"""Projection of contextual token vectors to 2-D: per layer, PCA first, then UMAP; cached.

* :mod:`.tokens` — which tokens (:class:`TokenSet` and its builders);
* :mod:`.compute` — layer features (single layers and scalar mixes), PCA, exact kNN, and the
  settings/result types;
* :mod:`.umapfit` — UMAP with precomputed neighbours, epoch progress and cancel, and
  :func:`warm_up` (compile umap's kernels once per process, off the GUI thread);
* :mod:`.projector` — :class:`Projector`, the per-layer cache;
* :mod:`.faithfulness` — trustworthiness, continuity and the kNN kept of a map
  (:func:`map_faithfulness`; Venna & Kaski 2001);
* :mod:`.export` — coordinates CSV and the TensorBoard projector pair;
* :mod:`.aligned`, :mod:`.knn_change`, :mod:`.animation` (with :mod:`.epoch_hook`) — the layers
  in one frame (AlignedUMAP or Procrustes), the tokens whose neighbours change most, the
  animation (issue 42).
"""
from elmo_engine.analysis.projection.compute import (FEW_PLACES, MIN_UMAP_POINTS, LayerSpec,
                                                     PcaResult, Projection, UmapParams,
                                                     collapsed_note, exact_knn, layer_features,
                                                     pca)
from elmo_engine.analysis.projection.projector import Projector
from elmo_engine.analysis.projection.faithfulness import (FAITHFULNESS_K,
                                                          FAITHFULNESS_MAX_POINTS, Faithfulness,
                                                          map_faithfulness)
from elmo_engine.analysis.projection.umapfit import is_warm, umap_2d, warm_up
from elmo_engine.analysis.projection.export import (coordinates_table, metadata_columns,
                                                    write_coordinates_csv, write_tensorboard)
from elmo_engine.analysis.projection.tokens import (TokenSet, all_tokens, labelled_tokens,
                                                    load_labelled, parse_word_list,
                                                    tokens_from_file, word_tokens)

__all__ = ["FAITHFULNESS_K", "FAITHFULNESS_MAX_POINTS", "FEW_PLACES", "Faithfulness",
           "map_faithfulness", "MIN_UMAP_POINTS", "LayerSpec", "PcaResult", "Projection", "Projector",
           "TokenSet", "UmapParams", "all_tokens", "collapsed_note", "coordinates_table",
           "exact_knn", "is_warm",
           "labelled_tokens", "layer_features", "load_labelled", "metadata_columns",
           "parse_word_list", "pca", "tokens_from_file", "umap_2d", "warm_up", "word_tokens",
           "write_coordinates_csv", "write_tensorboard"]
