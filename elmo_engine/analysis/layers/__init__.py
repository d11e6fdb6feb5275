"""Layers: what each biLM layer holds, measured three ways over one corpus.

* :mod:`.contextuality` (results in :mod:`.contextuality_result`, eigenvalues in
  :mod:`.spectra`) — self-similarity, intra-sentence similarity and maximum explainable variance
  per layer and direction, with anisotropy baselines (Ethayarajh 2019);
* :mod:`.cka` — linear CKA between layers and between models (Kornblith et al. 2019), with the
  unbiased HSIC estimator (Song et al. 2012; Nguyen et al. 2021);
* :mod:`.mdl` — online-code MDL probes (Voita & Titov 2020);
* :mod:`.hubness` — the skew of the k-occurrence distribution and the top hubs per layer
  (Radovanović et al. 2010);
* :mod:`.run` — the three on one model and corpus, end to end (the ``layers`` command and the
  app's Layers view); :mod:`.tables` — their results as text and CSV.
"""

#: the most tokens ``layers`` analyses (the shipped reference corpus has 82,000): the
#: per-word activations and Gram matrices grow with the corpus (~1 GB at this size). Here, not
#: in :mod:`.run`, so that the command line's parser reads it without loading torch.
MAX_LAYERS_TOKENS = 100_000
#: hubness: the neighbours counted and the most tokens sampled (here for the parser, as above)
HUBNESS_K = 10
HUBNESS_MAX_POINTS = 5000
#: the shipped reference corpus, under the resources folder
REFERENCE_CORPUS = ("reference_corpus", "sentences.txt")


def reference_corpus_path():
    """The shipped reference corpus (``resources/reference_corpus/sentences.txt``; 4,000
    sentences of public-domain fiction and OpenStax prose): a ``Path``. Here, not in
    :mod:`.run`, so that the app's views name it without loading torch."""
    from elmo_engine.resources import HERE

    return HERE.joinpath(*REFERENCE_CORPUS)
