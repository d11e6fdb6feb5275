"""The Units view's intervention panel and Number showcase, without Qt: what the panel changes
(:class:`InterventionSpec`), and the re-measure before / after on the live biLM — both LMs word
by word, the bundled minimal pairs, a probe of the top layer for the Ranking tab's labels and a
word's similarity across its contexts (:mod:`elmo_engine.analysis.units.remeasure`; Lakretz et
al. 2019, Elazar et al. 2021, Ethayarajh 2019) — and ``units ablate``'s showcase (run on the
worker by the controller).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from elmo_engine.analysis.units.sizes import DEFAULT_KS
from elmo_explorer.views.units.model import DIRECTIONS, RankSource

#: labelled words the re-measured probe is trained and scored on, and a word's contexts at most
PROBE_TOKENS = 5_000
SIMILARITY_SENTENCES = 40
#: the Number showcase: units ablated, random draws, labelled words ranked on
#: k of Number units: the engine's defaults, those a model's cells allow (at most half of them)
SHOWCASE_KS = DEFAULT_KS
SHOWCASE_SEEDS = 3
SHOWCASE_TOKENS = 20_000


@dataclass(frozen=True)
class InterventionSpec:
    """What the panel changes: ``units`` of ``state`` in ``layer`` of one or both directions;
    ``op`` zero / clamp (to ``value``) / scale (by ``value``) / patch (the ``donor`` sentence's
    values at framed ``position``). ``position`` 0: every position (zero, clamp, scale); t ≥ 1:
    from word t on in the direction's reading order."""

    layer: int = 1
    direction: str = "forward"
    state: str = "c"
    units: Tuple[int, ...] = ()
    op: str = "zero"
    value: float = 0.0
    position: int = 0
    donor: str = ""

    def describe(self) -> str:
        what = {"zero": "zeroed", "clamp": f"clamped to {self.value:g}",
                "scale": f"scaled by {self.value:g}",
                "patch": f"patched from “{self.donor}”"}[self.op]
        where = "at every position" if self.position == 0 else f"from word {self.position} on"
        shown = " ".join(map(str, self.units[:12])) + (" …" if len(self.units) > 12 else "")
        return (f"layer {self.layer} {self.direction} {self.state}, units {shown} {what} "
                f"{where}")


def parse_units(text: str) -> Tuple[int, ...]:
    """Unit numbers typed as ``3 17 40-45`` or ``3,17``: sorted, each once; InputError with
    the offending piece."""
    from elmo_engine.errors import InputError

    out: set = set()
    for piece in text.replace(",", " ").split():
        a, sep, b = piece.partition("-")
        try:
            lo, hi = int(a), int(b) if sep else int(a)
        except ValueError:
            raise InputError(f"units: {piece!r} is not a unit number or a range a-b") from None
        if lo < 0 or hi < lo or hi - lo > 100_000:
            raise InputError(f"units: {piece!r} is not a range of unit numbers")
        out.update(range(lo, hi + 1))
    if not out:
        raise InputError("units: give at least one unit number (e.g. 78 403)")
    return tuple(sorted(out))


def build_interventions(model, spec: InterventionSpec, token_vectors=None) -> List[Any]:
    """The engine's :class:`~elmo_engine.model.lstm_inspect.Intervention` list of ``spec``
    (checked against the model: a bad layer or unit is an InputError naming it)."""
    from elmo_engine.errors import InputError
    from elmo_engine.model.lstm_inspect import Intervention, Op, StateKind, patch_from

    kind = StateKind(spec.state)
    dirs = (0, 1) if spec.direction == "both" else (DIRECTIONS.index(spec.direction),)
    out = []
    for d in dirs:
        if spec.op == "patch":
            donor = spec.donor.split()
            if not donor:
                raise InputError("patch: type the sentence to patch from")
            if spec.position < 1:
                raise InputError("patch: choose the word position to patch at (1 or more)")
            iv = patch_from(model, donor, spec.layer, d, kind, spec.position, spec.units)
        else:
            iv = Intervention(spec.layer, d, kind, spec.units, Op(spec.op), value=spec.value,
                              position=spec.position or None)
        iv.check(model.opts)
        out.append(iv)
    return out


@dataclass
class Remeasure:
    """Before / after one intervention: the selected sentence word by word (both LMs'
    surprisal and top prediction), the bundled minimal pairs' accuracies per set, and the
    ``measures`` (a probe's accuracy, a word's similarity; ``notes`` say why one is missing).
    Without a softmax the LMs are not scored: ``before``, ``after`` and the pairs are None."""

    spec: Optional[InterventionSpec]
    before: Any                       # elmo_engine.analysis.units.WordPredictions, or None
    after: Any
    pairs_before: Any                 # elmo_engine.analysis.units.Accuracy, or None
    pairs_after: Any
    measures: Tuple[Any, ...] = ()    # elmo_engine.analysis.units.report.Measured
    notes: Tuple[str, ...] = ()
    description: str = ""

    @property
    def scored_lms(self) -> bool:
        """Whether the language models were scored (the checkpoint had a softmax)."""
        return self.before is not None

    def describe(self) -> str:
        return self.spec.describe() if self.spec is not None else self.description

    def saved(self):
        """The form a workspace keeps
        (:class:`~elmo_engine.analysis.units.report.SavedIntervention`)."""
        from elmo_engine.analysis.units.report import SavedIntervention

        return SavedIntervention(self.describe(), self.before, self.after, self.pairs_before,
                                 self.pairs_after, tuple(self.measures))

    @classmethod
    def from_saved(cls, s) -> "Remeasure":
        from elmo_engine.analysis.units.report import NOT_SCORED

        return cls(spec=None, before=s.before, after=s.after, pairs_before=s.pairs_before,
                   pairs_after=s.pairs_after, measures=s.measures, description=s.description,
                   notes=() if s.scored_lms else (NOT_SCORED[0].upper() + NOT_SCORED[1:] + ".",))


def bundled_minimal_pairs() -> List[Any]:
    from elmo_engine.analysis.language_model.pairs import bundled_pairs, read_pairs

    return [p for f in bundled_pairs() for p in read_pairs(f)]


def word_contexts(word: str, sentence: Sequence[str]) -> List[List[str]]:
    """The selected sentence and the sentences of the reference corpus (all of it), then of the
    demo POS task (EWT), that hold ``word``: :data:`SIMILARITY_SENTENCES` in all at most."""
    from elmo_engine.analysis.layers.run import reference_corpus_path
    from elmo_engine.io.datasets.demo import load_demo_task
    from elmo_engine.io.datasets.text_input import read_text_input

    out = [list(sentence)] if word in sentence else []
    for source in (read_text_input(reference_corpus_path()).tokens,
                   (s.tokens for s in load_demo_task("pos", "train"))):
        for s in source:
            if len(out) >= SIMILARITY_SENTENCES:
                return out
            if word in s:
                out.append(list(s))
    return out


def remeasure(model, softmax, tokens: Sequence[str], spec: InterventionSpec,
              pairs: Sequence[Any], token_vectors=None, state=None,
              labels: Optional[RankSource] = None, word: str = "",
              no_softmax: str = "") -> Remeasure:
    """Run ``spec`` on the live biLM (on the worker): before and after, side by side; with
    ``labels`` a probe of the top layer trained on the unchanged model (their first
    :data:`PROBE_TOKENS` words), with ``word`` its similarity across its contexts. ``softmax``
    None (``no_softmax`` says why): the LMs are not scored, the probe and the similarity are
    (an InputError, before any work, when neither was asked for)."""
    from elmo_engine.analysis.units.ablate import pair_accuracy, token_predictions
    from elmo_engine.analysis.units.remeasure import fit_probe, probe_under, similarity_under
    from elmo_engine.analysis.units.report import Measured
    from elmo_engine.errors import InputError
    from elmo_engine.progress import check, report

    if spec.position > len(tokens) + 1:
        raise InputError(f"position {spec.position}: the sentence has words 1 … {len(tokens)}")
    if softmax is None and labels is None and not word:
        raise InputError(f"{no_softmax or 'No softmax.'} Without it, Intervene re-measures a "
                         "probe (choose labels on the Ranking tab) or a word's similarity "
                         "(type a word or select one): give one of them.")
    ivs = build_interventions(model, spec, token_vectors)
    lm_steps = 4 if softmax is not None else 0
    steps = lm_steps + (labels is not None) + bool(word)
    before = after = pb = pa = None
    if softmax is not None:
        report(state, 0, steps, "the sentence before")
        before = token_predictions(model, softmax, tokens, (), token_vectors)
        check(state)
        report(state, 1, steps, "the sentence after")
        after = token_predictions(model, softmax, tokens, ivs, token_vectors)
        check(state)
        report(state, 2, steps, "the minimal pairs before")
        pb = pair_accuracy(model, softmax, pairs, (), token_vectors)
        check(state)
        report(state, 3, steps, "the minimal pairs after")
        pa = pair_accuracy(model, softmax, pairs, ivs, token_vectors)
    top = model.opts.n_layers
    measures: List[Measured] = []
    notes: List[str] = [] if softmax is not None else [no_softmax or "No softmax."]
    if labels is not None:
        check(state)
        report(state, lm_steps, steps, "a probe of the top layer")
        try:                            # labels that cannot train a probe: a note, the rest kept
            probe = fit_probe(model, labels.sentences(PROBE_TOKENS), top,
                              token_vectors=token_vectors)
            got = probe_under(model, probe, ivs, token_vectors)
            measures.append(Measured(
                f"probe accuracy, layer {top}", got.before, got.after,
                f"{labels.describe()}: trained on {got.train_tokens:,} words of the unchanged "
                f"model, scored on {got.test_tokens:,} held-out (majority {got.majority:.3f})"))
        except InputError as e:
            notes.append(f"No probe: {e}")
    if word:
        check(state)
        report(state, steps - 1, steps, f"the similarity of '{word}'")
        contexts = word_contexts(word, tokens)
        try:
            sim = similarity_under(model, word, contexts, top, ivs, token_vectors)
            shift = sum(sim.shift) / len(sim.shift)
            measures.append(Measured(
                f"similarity of '{word}', layer {top}", sim.before, sim.after,
                f"mean cosine of its {len(sim.occurrences)} occurrences (the sentence, the "
                f"reference corpus, EWT); one occurrence before → after: {shift:.3f} on average"))
        except InputError as e:
            notes.append(str(e))
    if before is None and not measures:                  # no softmax, and the word not found
        raise InputError(" ".join(notes))
    return Remeasure(spec=spec, before=before, after=after, pairs_before=pb, pairs_after=pa,
                     measures=tuple(measures), notes=tuple(notes))


def showcase_rows(src, res) -> List[Dict[str, Any]]:
    """The Number showcase's table: per set (all first) the baseline and, per k, each LM's
    accuracy with its top-k cells zeroed and mean ± sd with k random cells zeroed."""
    from elmo_engine.analysis.units.ablate import ALL

    sets = [ALL] + [s for s in res.baseline.by_set if s != ALL]
    rows = []
    for s in sets:
        rows.append({"set": s, "k": 0, "top": list(res.baseline.by_set[s]), "random": None})
        for row in res.rows:
            rows.append({"set": s, "k": row.k, "top": list(row.top.by_set[s]),
                         "random": [list(v) for v in row.random_stats(s)]})
    return rows


def showcase_note(src, res) -> str:
    """The Number showcase's note: what was ranked on what, the top cells, how to read it."""
    top = res.top_units
    return (f"Top layer's cells ranked for {src.label} on {src.name} (≤ {SHOWCASE_TOKENS:,} "
            f"labelled words); top cells forward {list(top[0][:4])}, backward "
            f"{list(top[1][:4])}. Each cell: the LM's accuracy with its own direction's top k "
            f"zeroed / k random zeroed (mean ± sd over {SHOWCASE_SEEDS} seeds).")


def showcase_ks(opts) -> Tuple[int, ...]:
    """The k of :data:`SHOWCASE_KS` a model of options ``opts`` allows (at most half its cells;
    empty for a model of fewer than 2)."""
    from elmo_engine.analysis.units.sizes import fitting_ks
    from elmo_engine.model.lstm_states import StateKind, state_width

    return fitting_ks(SHOWCASE_KS, state_width(opts, StateKind.C))


def number_showcase(model, softmax, token_vectors=None, state=None, ks=None,
                    seeds=SHOWCASE_SEEDS, max_tokens=SHOWCASE_TOKENS):
    """``units ablate``'s computation on the bundled data (EWT train's Number beside the
    checkout, else the demo POS task) and the bundled minimal pairs: (source, result). ``ks``
    None: those of :data:`SHOWCASE_KS` the model's cells allow."""
    from elmo_engine.analysis.units.ablate import number_units_experiment

    return number_units_experiment(model, softmax, bundled_minimal_pairs(), ks, seeds,
                                   max_tokens, token_vectors=token_vectors, task=state)


