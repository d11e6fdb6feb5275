"""What the app and the commands compute from the vectors: one package per analysis, and at the
top only what they share.

* :mod:`.contexts` — one word across contexts, per layer; contextual nearest neighbours;
* :mod:`.projection` — PCA/UMAP per layer;
* :mod:`.probes` — per-layer and scalar-mix probes, their tasks and tables;
* :mod:`.layers` — contextuality (Ethayarajh 2019), CKA (Kornblith et al. 2019) and MDL probes
  (Voita & Titov 2020) per layer;
* :mod:`.language_model` — the biLM's own predictions: ranks, surprisal, reach, minimal pairs;
* shared: :mod:`.activations` — direction slices and chunked embedding (used by ``layers`` and
  ``probes``); :mod:`.report` — a workspace's analysis as report tables and figures.

The figures of every analysis are drawn in :mod:`elmo_engine.io.figures` and its per-analysis
modules.
"""
from typing import Tuple

#: the halves of a biLM layer an analysis reads: both (forward ‖ backward), or one LSTM's. Here,
#: in the package's light root, so that the command line's parser offers them without numpy.
DIRECTIONS: Tuple[str, ...] = ("both", "forward", "backward")
