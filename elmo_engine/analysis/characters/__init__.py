"""What the char-CNN and the highway layers make of any word (issue 41).

- :mod:`.windows`: the character ids as strings, and every filter's activation on character
  windows, computed from the checkpoint's own parameters (float32, as the model computes them);
- :mod:`.word_lab`: one word at a time — its character ids, the filters it fires most with the
  n-gram that wins each one's max-pool, the highway gates per layer, its norm among known words
  and its nearest known words at layer 0;
- :mod:`.atlas`: every filter's strongest n-grams over a vocabulary (exact: every distinct
  max-pool window of the vocabulary is scored once), search by n-gram, a categorisation of the
  filters (capitals, digits, suffixes, prefixes, punctuation) and its TSV;
- :mod:`.perturb`: a word perturbed in its sentence (edits, case, affixes, repeated letters)
  and the cosine of each variant to the original per layer and direction.
"""
