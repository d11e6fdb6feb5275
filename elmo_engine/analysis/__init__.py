"""What the app and the commands compute from the vectors.

* :mod:`.compare` — one word across contexts, per layer; :mod:`.neighbours`,
  :mod:`.neighbour_corpus` — contextual nearest neighbours;
* :mod:`.projection` — PCA/UMAP per layer;
* :mod:`.probes` — per-layer and scalar-mix probes, their tasks and tables;
* :mod:`.report` — a workspace's analysis as report tables and figures.
* :mod:`.contextuality` — self-similarity, intra-sentence similarity and maximum explainable
  variance per layer and direction, with anisotropy baselines (Ethayarajh 2019);
* :mod:`.cka` — linear CKA between layers and between models (Kornblith et al. 2019), with the
  unbiased HSIC estimator (Song et al. 2012; Nguyen et al. 2021);
* :mod:`.mdl` — online-code MDL probes (Voita & Titov 2020);
* :mod:`.activations` — direction slices and chunked embedding shared by the three.
"""
