"""The language-model results as documents, table rows and a report part.

One place builds them for every consumer, so the app's "Language model" view (its exports and
its report section), ``elmo-explorer export report`` and ``elmo-explorer lm --json`` agree:

* :func:`sentence_document`: the ``lm --json`` record of one sentence (``tokens``,
  ``forward``/``backward`` records, ``substitutes``, ``perplexity``, ``reach``);
* :func:`token_rows`: one row per token (both directions), the view's TSV export and the
  report's table;
* :func:`report_part`: the report's tables and figures
(:mod:`elmo_engine.io.figures.language_model`) from
  results already computed (the app's cache); :func:`compute_report_part` computes them from a
  saved view state first (the headless report).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from elmo_engine.analysis.language_model.pairs import (DIRECTIONS, MinimalPair, PairScore,
                                                       accuracy_by_set, bundled_pairs,
                                                       read_pairs, score_pairs)
from elmo_engine.analysis.language_model.predictions import SentencePredictions, predict
from elmo_engine.analysis.language_model.reach import REPLACEMENT, ReachMatrix, reach
from elmo_engine.io import figures as F
from elmo_engine.io.figures import language_model as lm_figures
from elmo_engine.io.report import ReportFigure, ReportPart, ReportTable

#: the bundled sets scored with the demo model (``elmo-explorer lm --pairs bundled --json``
#: wrapped with the model's checksum), in ``resources/``: shown and reported instead of
#: scoring the same pairs with the same model again (a minute on 2 cores)
RECORDED_PAIRS = "lm_pairs_recorded.json"
MAX_RECORDED_BYTES = 8 << 20
#: the view's name in a workspace file (``views["language-model"]``)
VIEW = "language-model"
#: the minimal-pair source meaning "the sets shipped with the app"
BUNDLED = "bundled"
DIRECTION_LABELS = ("forward", "backward")


def sentence_document(tokens: Sequence[str], predictions: Optional[SentencePredictions],
                      reach_matrix: Optional[ReachMatrix]) -> Dict[str, Any]:
    """One sentence as ``elmo-explorer lm --json`` writes it (``reach`` only when given)."""
    doc: Dict[str, Any] = {"tokens": list(tokens)}
    if predictions is not None:
        doc.update(predictions.to_json())
    if reach_matrix is not None:
        doc["reach"] = reach_matrix.to_json()
        doc["reach_replacement"] = reach_matrix.replacement
    return doc


def reach_rows(reach_matrix: ReachMatrix, token: int) -> Tuple[np.ndarray, List[str]]:
    """Token ``token``'s row of the reach matrix: (2·(L+1), n), one row per layer and direction
    (layer 0 forward, layer 0 backward, layer 1 forward …), and the row labels."""
    d = reach_matrix.distance                                         # (L+1, 2, n, n)
    rows = d[:, :, token, :].reshape(-1, d.shape[-1])                 # (2(L+1), n)
    labels = [f"layer {layer} {name}" for layer in range(d.shape[0])
              for name in DIRECTION_LABELS]
    return rows, labels


def token_rows(tokens: Sequence[str], predictions: Optional[SentencePredictions],
               top_shown: int = 5) -> List[Dict[str, Any]]:
    """One row per token: rank, probability, surprisal (bits), entropy (bits) and the first
    ``top_shown`` predictions of each direction, and the substitutes."""
    rows = []
    for i, word in enumerate(tokens):
        row: Dict[str, Any] = {"index": i + 1, "word": word}
        if predictions is not None:
            for name, rec in (("forward", predictions.forward[i]),
                              ("backward", predictions.backward[i])):
                row |= {f"{name} rank": rec.rank, f"{name} prob": rec.prob,
                        f"{name} surprisal": rec.surprisal, f"{name} entropy": rec.entropy,
                        f"{name} top": " ".join(c.word for c in rec.top[:top_shown])}
            row["substitutes"] = " ".join(c.word for c in predictions.substitutes[i][:top_shown])
            row["in vocabulary"] = predictions.forward[i].in_vocabulary
        rows.append(row)
    return rows


def accuracy_rows(scores: Sequence[PairScore]) -> List[Dict[str, Any]]:
    return [{"set": a.set, "pairs": a.pairs,
             **{d: round(acc, 4) for d, acc in zip(DIRECTIONS, a.accuracy)}}
            for a in accuracy_by_set(scores)]


def report_part(tokens: Sequence[str], predictions: Optional[SentencePredictions],
                reach_matrix: Optional[ReachMatrix], token: Optional[int],
                scores: Sequence[PairScore] = (), pair: Optional[int] = None,
                figure_dir: Optional[Path] = None,
                formats: Sequence[str] = F.FORMATS, dpi: Optional[int] = None,
                style: Optional[F.FigureStyle] = None) -> ReportPart:
    """The language-model section of a report from computed results (see module docstring)."""
    part = ReportPart()
    text = " ".join(tokens)
    if predictions is not None:
        f, b = predictions.perplexity
        part.tables.append(ReportTable(
            "language_model_tokens", f"Language models on \"{text}\"",
            token_rows(tokens, predictions),
            caption=f"Perplexity: forward {f:.2f}, backward {b:.2f} (n+1 predictions per "
                    "direction). Rank 1 = the LM's first choice; surprisal and entropy in bits; "
                    "substitutes: the words both directions agree on at that place."))
    elif tokens:
        part.notes.append("Language model: no softmax beside the checkpoint, so no predictions "
                          "(the reach of each token is reported).")
    rows: Optional[np.ndarray]
    labels: List[str]
    if reach_matrix is not None and token is not None and 0 <= token < len(tokens):
        rows, labels = reach_rows(reach_matrix, token)
        part.tables.append(ReportTable(
            "language_model_reach", f"Reach of '{tokens[token]}' (token {token + 1})",
            [{"layer, direction": lab, **{f"{j + 1} {w}": round(float(v), 6)
                                          for j, (w, v) in enumerate(zip(tokens, row))}}
             for lab, row in zip(labels, rows)],
            caption=f"Cosine distance of the token's vector when each token is replaced by "
                    f"{REPLACEMENT}: the forward half never moves for a word on its right, the "
                    "backward half never for one on its left, layer 0 only for the token itself."))
    if scores:
        part.tables.append(ReportTable(
            "language_model_pairs", "Minimal pairs: accuracy per set and direction",
            accuracy_rows(scores), ["set", "pairs", *DIRECTIONS],
            caption="The share of pairs whose grammatical sentence gets the higher "
                    "log-probability (combined: the sum of both directions')."))
    if figure_dir is None:
        return part
    if tokens:
        ranks = surprisal = ppl = None
        if predictions is not None:
            ranks = [[r.rank for r in predictions.forward], [r.rank for r in predictions.backward]]
            surprisal = [[r.surprisal for r in predictions.forward],
                         [r.surprisal for r in predictions.backward]]
            ppl = predictions.perplexity
        rows, labels = (reach_rows(reach_matrix, token)
                        if reach_matrix is not None and token is not None else (None, []))
        fig = lm_figures.sentence_figure(tokens, ranks, surprisal, ppl, token, rows, labels)
        part.figures += [ReportFigure(p, "The forward and backward LM at each token (colour: "
                                         "rank of the actual word) and the reach of the "
                                         "selected token")
                         for p in F.save(fig, Path(figure_dir) / "language_model_sentence",
                                         list(formats), dpi, style)]
    if scores:
        fig = pairs_figure(scores, pair)
        part.figures += [ReportFigure(p, "Minimal pairs: accuracy per set and direction")
                         for p in F.save(fig, Path(figure_dir) / "language_model_pairs",
                                         list(formats), dpi, style)]
    return part


def pairs_figure(scores: Sequence[PairScore], pair: Optional[int] = None):
    """The accuracy bars, and pair ``pair``'s per-token differences when given."""
    table = accuracy_by_set(scores)
    acc = np.array([a.accuracy for a in table], float).reshape(-1, 3)
    if pair is not None and 0 <= pair < len(scores):
        s = scores[pair]
        words = [g if g == b else f"{g}/{b}" for g, b in zip(s.pair.good, s.pair.bad)]
        return lm_figures.pairs_figure([a.set for a in table], acc, words,
                                       (s.forward_diff, s.backward_diff),
                                       f"{' '.join(s.pair.good)} / {' '.join(s.pair.bad)}"[:90])
    return lm_figures.pairs_figure([a.set for a in table], acc)


def pair_files(source: str) -> List[Path]:
    """The minimal-pair files of a source: :data:`BUNDLED` or a path."""
    return bundled_pairs() if source == BUNDLED else [Path(source)]


def read_recorded_pairs(path: Path, checksum: str,
                        bundled: Sequence[MinimalPair]) -> Optional[Tuple[PairScore, ...]]:
    """The recorded minimal-pair scores in ``path`` when they were made with the model
    ``checksum`` from exactly the pairs ``bundled`` (in order); None otherwise, or when the
    file is missing, too large or not of that form."""
    try:
        if Path(path).stat().st_size > MAX_RECORDED_BYTES:
            return None
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
        if doc["model"]["checksum"] != checksum:
            return None
        recs = doc["result"]["pairs"]
        if len(recs) != len(bundled):
            return None
        out = []
        for rec, pair in zip(recs, bundled):
            if (rec["set"], tuple(rec["good"].split()), tuple(rec["bad"].split())) != (
                    pair.set, pair.good, pair.bad):
                return None
            lp3 = [(float(rec["log_prob"][d][0]), float(rec["log_prob"][d][1])) for d in DIRECTIONS]
            lp = (lp3[0], lp3[1], lp3[2])
            fwd = tuple(float(x) for x in rec["forward_diff"])
            bwd = tuple(float(x) for x in rec["backward_diff"])
            if len(fwd) != len(pair.good) + 1 or len(bwd) != len(pair.good) + 1:
                return None
            out.append(PairScore(pair=pair, log_prob=lp, forward_diff=fwd, backward_diff=bwd))
        return tuple(out)
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError):
        return None


def recorded_or_scored(emb, softmax, source: str, state=None, recorded: bool = True
                       ) -> Tuple[Tuple[PairScore, ...], bool]:
    """The scores of the pairs of ``source``: the recorded ones when ``recorded`` and they
    were made with this model from exactly these pairs, else scored now. Returns the scores and
    whether they are the recorded ones."""
    pairs = [p for f in pair_files(source) for p in read_pairs(f)]
    if recorded and source == BUNDLED:
        from elmo_engine.resources import HERE

        got = read_recorded_pairs(HERE / RECORDED_PAIRS, emb.checksum, pairs)
        if got is not None:
            return got, True
    return score_pairs(emb, softmax, pairs, state), False


def compute_report_part(emb, softmax, state: Dict[str, Any], tokens: Sequence[Sequence[str]],
                        figure_dir: Optional[Path] = None,
                        formats: Sequence[str] = F.FORMATS,
                        style: Optional[F.FigureStyle] = None) -> ReportPart:
    """The view's report section from its saved state (``views["language-model"]``: the
    ``sentence``, ``token``, ``top_k`` and, once scored in the view, ``pairs``), computed with
    ``emb`` and ``softmax`` (None: no predictions or pairs)."""
    s, t = state.get("sentence"), state.get("token")
    if not (isinstance(s, int) and 0 <= s < len(tokens) and tokens[s]):
        return ReportPart()
    sent = tuple(tokens[s])
    t = t if isinstance(t, int) and 0 <= t < len(sent) else None
    k = state.get("top_k")
    k = k if isinstance(k, int) and 1 <= k <= 100 else 10
    preds = predict(emb, softmax, [sent], top_k=k)[0] if softmax is not None else None
    scores: Tuple[PairScore, ...] = ()
    source = state.get("pairs")
    if softmax is not None and isinstance(source, str) and source:
        scores, _recorded = recorded_or_scored(emb, softmax, source)
    pair = state.get("pair") if isinstance(state.get("pair"), int) else None
    return report_part(sent, preds, reach(emb, sent), t, scores, pair, figure_dir, formats,
                       style=style)
