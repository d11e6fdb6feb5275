"""ELMo's two language models, made visible: predictions (:mod:`.predictions`), what each
direction can see (:mod:`.reach`) and minimal pairs (:mod:`.pairs`). The softmax is
:class:`elmo_engine.model.softmax.Softmax`; ``docs/guide/language-model.md`` explains the numbers.
"""
from elmo_engine.analysis.language_model.pairs import (MinimalPair, PairScore, SetAccuracy,
                                                       accuracy_by_set, read_pairs, score_pairs)
from elmo_engine.analysis.language_model.predictions import (Candidate, SentencePredictions,
                                                             TokenPrediction, predict)
from elmo_engine.analysis.language_model.reach import ReachCurve, ReachMatrix, reach, reach_curve

__all__ = ["Candidate", "MinimalPair", "PairScore", "ReachCurve", "ReachMatrix",
           "SentencePredictions", "SetAccuracy", "TokenPrediction", "accuracy_by_set", "predict",
           "reach", "reach_curve", "read_pairs", "score_pairs"]
