"""What the app and the commands compute from the vectors.

* :mod:`.compare` — one word across contexts, per layer; :mod:`.neighbours`,
  :mod:`.neighbour_corpus` — contextual nearest neighbours;
* :mod:`.projection` — PCA/UMAP per layer;
* :mod:`.probes` — per-layer and scalar-mix probes, their tasks and tables;
* :mod:`.report` — a workspace's analysis as report tables and figures.
"""
