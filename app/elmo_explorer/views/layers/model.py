"""The Layers view's state, in plain Python: its settings, the results per checkpoint and corpus,
the cross-model comparison and the MDL probes.

No Qt here: :class:`LayersModel` is what :class:`~elmo_explorer.views.layers.controller.LayersPanel`
(the controller) keeps and :class:`~elmo_explorer.views.layers.view.LayersView` draws. Results are
kept in the JSON form of ``elmo-explorer layers --json`` (``contextuality``, ``cka``, ``compare``,
``mdl``), so that a recorded result, a computed one and a saved workspace all read the same way.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from elmo_engine.model.tokenize import Tokenization

#: the result shipped for the first launch, and the one command that makes it (from the repository
#: root; re-run it whenever the bundled demo model changes, then move the file into resources/,
#: which no command writes)
RECORDED_FILE = "layers_recorded.json"
RECORDED_SENTENCES = 1000
RECORDED_COMMAND = ("elmo-explorer layers resources/reference_corpus/sentences.txt --checkpoint "
                    f"resources/demo_model --max-sentences {RECORDED_SENTENCES} "
                    "--json -o layers_recorded.json")
DEFAULT_SENTENCES = RECORDED_SENTENCES         # well under a minute on 2 cores (demo model)
MDL_TASKS = (("demo-pos", "Demo POS"), ("demo-wsd", "Demo word sense"))
DEFAULT_MDL_SENTENCES = 600
VIEW_STATE_VERSION = 1


@dataclass
class LayersSettings:
    """What the user chose: the corpus ("" = the shipped reference corpus), how many of its
    sentences (a seeded sample; ``full``: all, up to the analyses' token bound), raw or
    anisotropy-adjusted curves, the labelled sentences each MDL probe transmits, and whether a
    corpus of the user's is split on spaces only (``pretokenized``, as ``layers
    --pretokenized``)."""

    corpus: str = ""
    sentences: int = DEFAULT_SENTENCES
    full: bool = False
    adjusted: bool = False
    mdl_sentences: int = DEFAULT_MDL_SENTENCES
    pretokenized: bool = False

    @property
    def split_on_spaces(self) -> bool:
        """What the reader is told: ``pretokenized`` for a corpus of the user's only."""
        return self.pretokenized and bool(self.corpus)

    @classmethod
    def from_dict(cls, d: Any, base: Optional["LayersSettings"] = None) -> "LayersSettings":
        """Valid keys of ``d`` over ``base``; anything else is ignored."""
        out = LayersSettings(**asdict(base or cls()))
        if not isinstance(d, dict):
            return out
        if isinstance(d.get("corpus"), str):
            out.corpus = d["corpus"]
        for key in ("sentences", "mdl_sentences"):
            v = d.get(key)
            if isinstance(v, int) and not isinstance(v, bool) and 2 <= v <= 10_000_000:
                setattr(out, key, v)
        for key in ("full", "adjusted", "pretokenized"):
            if isinstance(d.get(key), bool):
                setattr(out, key, d[key])
        return out


def corpus_key(path: str) -> Tuple[str, int, int]:
    """A corpus file's identity for the cache: path, size and modification time (ns)."""
    try:
        st = Path(path).stat()
        return str(path), st.st_size, st.st_mtime_ns
    except OSError:
        return str(path), -1, -1


@dataclass
class LayersModel:
    """Settings, results and jobs of the Layers view.

    Attributes
    ----------
    settings : the user's choices
    result : the shown result: ``{"model", "corpus", "contextuality", "cka", "recorded"}``
    analysis : the engine's :class:`~elmo_engine.analysis.layers.run.LayersAnalysis` behind
        ``result`` when it was computed in this session (its CKA sample feeds a comparison)
    compare : the shown comparison: ``{"model", "cka", "cka_self"}`` or None
    mdl : task → the ``mdl`` object of each MDL probe run on the current model
    cache : (checksum, corpus key, sentences, pretokenized) → (result, analysis); kept for
        the session

    The jobs computing them are the panel's job group's (``worker.group("layers")``).
    """

    settings: LayersSettings = field(default_factory=LayersSettings)
    result: Optional[dict] = None
    analysis: Any = None
    compare: Optional[dict] = None
    mdl: Dict[str, dict] = field(default_factory=dict)
    cache: Dict[tuple, tuple] = field(default_factory=dict)

    # ---- results ----------------------------------------------------------------------------
    def n_sentences(self) -> Optional[int]:
        """The sentences to analyse: None for the whole corpus."""
        return None if self.settings.full else self.settings.sentences

    def key(self, checksum: str, corpus: str, precision: str = "fp32") -> tuple:
        """A result's identity: the model and the precision it ran in (bf16 moves CKA by up
        to 6e-4), the corpus file, the sentences and their reading."""
        return (checksum, precision, corpus_key(corpus), self.n_sentences(),
                self.settings.split_on_spaces)

    def cached(self, key: tuple) -> bool:
        return key in self.cache

    def show(self, key: tuple) -> None:
        """Show the cached result of ``key`` (its comparison is dropped: it was for another)."""
        result, analysis = self.cache[key]
        if result is not self.result:
            self.compare = None
        self.result, self.analysis = result, analysis

    def store(self, key: tuple, result: dict, analysis: Any) -> None:
        self.cache[key] = (result, analysis)
        self.show(key)

    def model_changed(self) -> None:
        """A new model: its results are not the old one's."""
        self.result, self.analysis, self.compare = None, None, None
        self.mdl = {}

    # ---- what the view draws ------------------------------------------------------------------
    def curves(self, measure: str) -> List[dict]:
        """Per direction: ``{"direction", "layers", "values", "baselines"}`` of one measure
        (``adjusted``: value − baseline; baselines then 0)."""
        if self.result is None:
            return []
        out = []
        for d in ("both", "forward", "backward"):
            xs, vals, bases = [], [], []
            for e in self.result["contextuality"]["layers"]:
                m = e["directions"].get(d, {}).get(measure)
                if m is None or m.get("value") is None:
                    continue
                xs.append(e["layer"])
                adj = self.settings.adjusted
                vals.append(m["adjusted"] if adj else m["value"])
                bases.append(0.0 if adj else m["baseline"])
            if xs:
                out.append({"direction": d, "layers": xs, "values": vals, "baselines": bases})
        return out

    def cka_shown(self) -> Optional[dict]:
        """The CKA matrix to draw: model A × model B after a comparison, else A's layers."""
        if self.compare is not None:
            return self.compare["cka"]
        return None if self.result is None else self.result["cka"]

    def mdl_rows(self, probe_runs: List[Any], model: Optional[str] = None) -> List[List[str]]:
        """One row per task and layer (and the mix): codelength, compression, the MDL probe's
        accuracy on its last block, and the test accuracy of the Probes tab's latest run of the
        same task on the same model (``model``: the runs' model label; — when there is none)."""
        rows = []
        for task, m in self.mdl.items():
            run = next((r for r in reversed(probe_runs) if getattr(r, "task", "") == task
                        and (model is None or getattr(r, "model", None) == model)), None)
            accs: Dict[Optional[int], float] = {}
            if run is not None:
                accs = {lay.layer: lay.test for lay in run.layers}
                accs[None] = run.mix.test
            for c in m["layers"] + ([m["mix"]] if m.get("mix") else []):
                acc = accs.get(c["layer"])
                rows.append([task, c["name"], f"{c['online_codelength_bits'] / 1000:.2f}",
                             _fmt(c["compression"]), _fmt(c["final_block_accuracy"]),
                             "—" if acc is None else f"{acc:.3f}"])
        return rows

    def hubness(self) -> Optional[dict]:
        """The shown result's ``hubness`` object (``layers --json``), or None (a result
        recorded before issue 42 has none: Run computes it)."""
        from elmo_engine.analysis.layers.report import valid_hubness

        h = None if self.result is None else self.result.get("hubness")
        return h if valid_hubness(h) else None

    def hub_rows(self) -> List[List[str]]:
        """One row per layer and hub: layer, skewness of N_k, N_k, token, example context."""
        h = self.hubness()
        if h is None:
            return []
        return [[str(e["layer"]), f"{e['skewness']:.2f}", str(x["count"]), x["token"],
                 x.get("context", "")] for e in h["layers"] for x in e["hubs"]]

    def summary(self) -> str:
        """One line about the shown result: model, corpus, sentences, tokens, words, recorded."""
        r = self.result
        if r is None:
            return ""
        ctx = r["contextuality"]
        text = (f"{r['model'].get('name') or 'model'} on {Path(r['corpus']['path']).name}: "
                f"{ctx['sentences']:,} sentences, {ctx['tokens']:,} tokens, {ctx['words']:,} words "
                f"with ≥ {ctx['min_count']} occurrences")
        if r.get("recorded"):
            text += f" — recorded with: {r['recorded']}"
        return text

    # ---- workspace ----------------------------------------------------------------------------
    def view_state(self) -> dict:
        """Settings and the shown results as JSON values (no activations)."""
        return {"version": VIEW_STATE_VERSION, "settings": asdict(self.settings),
                "result": self.result, "compare": self.compare, "mdl": self.mdl}

    def restore(self, state: Any, checksum: str) -> None:
        """Apply a saved ``view_state()``: the settings always; the results only when they were
        computed with the loaded model (``checksum``). Invalid parts are ignored."""
        if not isinstance(state, dict):
            return
        saved = state.get("settings")
        self.settings = LayersSettings.from_dict(saved, self.settings)
        if not (isinstance(saved, dict) and "pretokenized" in saved):
            self.settings.pretokenized = False     # saved before the switch: tokenized
        result = state.get("result")
        if result is not None and valid_result(result) and result["model"].get("checksum") == checksum:
            self.result, self.analysis = result, None
            cmp = state.get("compare")
            self.compare = cmp if isinstance(cmp, dict) and _valid_cka(cmp.get("cka")) else None
        mdl = state.get("mdl")
        if isinstance(mdl, dict) and (result is None or valid_result(result)):
            self.mdl = {k: v for k, v in mdl.items()
                        if isinstance(v, dict) and isinstance(v.get("layers"), list)}


def _fmt(v: Any) -> str:
    return "—" if v is None or not math.isfinite(v) else f"{v:.3f}"


def _valid_cka(c: Any) -> bool:
    return (isinstance(c, dict) and isinstance(c.get("matrix"), list) and bool(c["matrix"])
            and isinstance(c.get("rows"), list) and isinstance(c.get("columns"), list)
            and len(c["rows"]) == len(c["matrix"])
            and all(isinstance(r, list) and len(r) == len(c["columns"]) for r in c["matrix"]))


def valid_result(r: Any) -> bool:
    """Whether ``r`` has the parts the view draws (``layers --json`` or a saved result)."""
    try:
        return (isinstance(r, dict) and isinstance(r["model"], dict)
                and isinstance(r["corpus"]["path"], str)
                and isinstance(r["contextuality"]["layers"], list) and _valid_cka(r["cka"]))
    except (KeyError, TypeError):
        return False


def read_recorded(path: Path) -> Optional[dict]:
    """The shipped ``layers --json`` result, labelled with its command; None when it is not
    there or not valid (then nothing is shown until the user runs the analysis)."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not valid_result(doc):
        return None
    return {"model": doc["model"], "corpus": doc["corpus"], "contextuality": doc["contextuality"],
            "cka": doc["cka"], "hubness": doc.get("hubness"), "recorded": RECORDED_COMMAND}


def result_dict(info: dict, corpus: str, n_file: Optional[int], n: Optional[int], analysis,
                pretokenized: bool = False) -> dict:
    """The view's result of a :class:`~elmo_engine.analysis.layers.run.LayersAnalysis` of
    ``corpus`` (``n`` sampled of ``n_file`` sentences), in ``layers --json``'s form."""
    res, tokens = analysis
    hub = res.hubness
    return {"model": info, "corpus": {"path": corpus, "sentences_in_file": n_file,
                                      "sentences": len(tokens), "max_sentences": n,
                                      "tokens": res.contextuality.n_tokens,
                                      "tokenization": Tokenization.of(pretokenized).value},
            "contextuality": res.contextuality.to_dict(), "cka": res.cka.to_dict(),
            "hubness": None if hub is None else hub.to_dict(), "recorded": None,
            "timings": res.timings}
