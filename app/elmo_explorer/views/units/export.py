"""Exports of the Units view, as functions of values: the ranking table, its top-k curves (every
point), the intervention's before → after and the Number showcase as TSV; the top-k curves
(:mod:`elmo_engine.io.figures.units`, the figure ``units rank --figure`` and the report draw)
and the selected sentence's mean forget and input gates per word as PNG, SVG or PDF."""
from __future__ import annotations

from pathlib import Path
from typing import List

from elmo_engine.atomic import atomic_write_text
from elmo_engine.io import figures
from elmo_explorer.views.units.model import STATE_NAMES, UnitsModel

#: File → Export entries: (menu text, kind); FIGURES are figures, the others TSV
ENTRIES = (("Units ranking (TSV)…", "ranking"), ("Top-k curves (TSV)…", "curve"),
           ("Top-k curves (PNG/SVG/PDF)…", "curve-figure"),
           ("Intervention before → after (TSV)…", "intervention"),
           ("Number units ablation (TSV)…", "showcase"),
           ("Gate means per word (PNG/SVG/PDF)…", "gates"))
FIGURES = ("curve-figure", "gates")


def has(m: UnitsModel, kind: str) -> bool:
    return bool({"ranking": m.ranking, "curve": m.ranking, "curve-figure": m.ranking,
                 "intervention": m.remeasure, "showcase": m.showcase,
                 "gates": m.sentence}[kind])


def _clean(text: str) -> str:
    return str(text).replace("\t", " ").replace("\n", " ")


def _lm_rows(res) -> List[List[str]]:
    """The intervention's language-model part: word by word, then the minimal pairs."""
    rows = [["position", "word", "fwd_top_before", "fwd_top_after", "fwd_bits_before",
             "fwd_bits_after", "bwd_top_before", "bwd_top_after", "bwd_bits_before",
             "bwd_bits_after"]]
    b, a = res.before, res.after
    for i, w in enumerate(b.words):
        cells = [str(i + 1), _clean(w)]
        for d in (0, 1):
            cells += [_clean(b.top[d][i]), _clean(a.top[d][i]),
                      f"{b.surprisal[d][i]:.4f}", f"{a.surprisal[d][i]:.4f}"]
        rows.append(cells)
    rows.append([])
    rows.append(["pairs", "forward_before", "forward_after", "backward_before",
                 "backward_after", "combined_before", "combined_after"])
    for name, before in res.pairs_before.by_set.items():
        after = res.pairs_after.by_set[name]
        rows.append([name] + [f"{v:.4f}" for x, y in zip(before, after) for v in (x, y)])
    return rows


def tsv(m: UnitsModel, kind: str) -> str:
    """The table of ``kind`` ("ranking", "intervention", "showcase") as TSV with a header."""
    if not has(m, kind):
        raise LookupError("nothing to export yet")
    rows: List[List[str]] = []
    if kind in ("ranking", "curve"):
        from elmo_engine.analysis.units.report import curve_rows, ranking_rows

        doc = m.ranking
        assert doc is not None                              # has() said so
        table = (ranking_rows if kind == "ranking" else curve_rows)(doc)
        rows.append([f"# {_clean(doc['source'])}: {doc['tokens']} labelled words, "
                     f"{len(doc['classes'])} classes"])
        rows.append(list(table[0]))
        rows += [[_clean(r.get(c, "")) for c in table[0]] for r in table]
    elif kind == "intervention":
        res = m.remeasure
        assert res is not None                              # has() said so
        rows.append(["# " + _clean(res.describe())])
        if not res.scored_lms:
            from elmo_engine.analysis.units.report import NOT_SCORED

            rows.append(["# " + NOT_SCORED])
        else:
            rows += _lm_rows(res)
        if res.measures:
            rows.append([])
            rows.append(["measure", "before", "after", "note"])
            rows += [[_clean(x.name), f"{x.before:.4f}", f"{x.after:.4f}", _clean(x.note)]
                     for x in res.measures]
    else:
        rows.append(["# " + _clean(m.showcase_note)] if m.showcase_note else [])
        rows.append(["pairs", "k", "forward_top", "backward_top", "combined_top",
                     "forward_random_mean", "forward_random_sd", "backward_random_mean",
                     "backward_random_sd", "combined_random_mean", "combined_random_sd"])
        for r in m.showcase:
            rand = ([""] * 6 if r["random"] is None
                    else [f"{v:.4f}" for pair in r["random"] for v in pair])
            rows.append([r["set"], str(r["k"])] + [f"{v:.4f}" for v in r["top"]] + rand)
    return "".join("\t".join(r) + "\n" for r in rows if r is not None)


def write_tsv(m: UnitsModel, kind: str, path) -> Path:
    atomic_write_text(path, tsv(m, kind))
    return Path(path)


def gates_figure(m: UnitsModel):
    """The selected sentence's mean forget and input gate per word (None: nothing drawn)."""
    rows = m.sentence
    if rows is None:
        return None
    fig, ax = figures.new_figure(6.5, 3.2)
    x = list(range(1, len(rows.tokens) + 1))
    ax.plot(x, rows.forget, marker="o", color=figures.OKABE_ITO[5], label="forget f")
    ax.plot(x, rows.input, marker="s", color=figures.OKABE_ITO[6], label="input i")
    ax.set_xticks(x)
    ax.set_xticklabels([t[:12] for t in rows.tokens], rotation=45, ha="right")
    ax.set_ylim(0, 1)
    ax.set_ylabel("mean gate over the units")
    ax.spines[["top", "right"]].set_visible(False)
    figures.legend_outside(ax)
    s = rows.settings
    ax.set_title(f"layer {s.layer} {s.direction}: mean gates per word "
                 f"(rows show {STATE_NAMES[s.state]})", fontsize="medium")
    return fig


def curve_figure(m: UnitsModel):
    """The top-k curves of the last ranking (None: nothing ranked)."""
    if m.ranking is None:
        return None
    from elmo_engine.io.figures.units import topk_figure

    return topk_figure(m.ranking["rankings"], f"{m.ranking['source']}: a probe on the top-k "
                                              "units against k random units (held out)")


def write_figure(m: UnitsModel, path, options=None, kind: str = "gates") -> List[Path]:
    fig = curve_figure(m) if kind == "curve-figure" else gates_figure(m)
    if fig is None:
        raise LookupError("nothing to export yet")
    return figures.save(fig, path, style=options.style() if options is not None else None)
