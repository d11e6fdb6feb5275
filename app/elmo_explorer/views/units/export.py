"""Exports of the Units view, as functions of values: the ranking table, the intervention's
before → after and the Number showcase as TSV, and the selected sentence's mean forget and input
gates per word as PNG, SVG or PDF (drawn with :mod:`elmo_engine.io.figures`)."""
from __future__ import annotations

from pathlib import Path
from typing import List

from elmo_engine.atomic import atomic_write_text
from elmo_engine.io import figures
from elmo_explorer.views.units.model import RANK_KS, STATE_NAMES, UnitsModel

#: File → Export entries: (menu text, kind); "gates" is a figure, the others TSV
ENTRIES = (("Units ranking (TSV)…", "ranking"), ("Intervention before → after (TSV)…",
                                                  "intervention"),
           ("Number units ablation (TSV)…", "showcase"),
           ("Gate means per word (PNG/SVG/PDF)…", "gates"))


def has(m: UnitsModel, kind: str) -> bool:
    return bool({"ranking": m.ranking, "intervention": m.remeasure, "showcase": m.showcase,
                 "gates": m.sentence}[kind])


def _clean(text: str) -> str:
    return str(text).replace("\t", " ").replace("\n", " ")


def tsv(m: UnitsModel, kind: str) -> str:
    """The table of ``kind`` ("ranking", "intervention", "showcase") as TSV with a header."""
    if not has(m, kind):
        raise LookupError("nothing to export yet")
    rows: List[List[str]] = []
    if kind == "ranking":
        rows.append(["layer", "direction", "state", "accuracy_all", "majority",
                     "top_mean_diff", "top_elastic_net"]
                    + [f"k{k}_{w}" for k in RANK_KS for w in ("top", "random_mean")])
        for r in m.ranking:
            cells = [str(r["layer"]), r["direction"], r["state"], f"{r['all']:.4f}",
                     f"{r['majority']:.4f}", " ".join(map(str, r["top"]["mean-diff"])),
                     " ".join(map(str, r["top"]["elastic-net"]))]
            for k in RANK_KS:
                pt = r["curve"].get(str(k))
                cells += ["", ""] if pt is None else [f"{pt[0]:.4f}", f"{pt[1]:.4f}"]
            rows.append(cells)
    elif kind == "intervention":
        res = m.remeasure
        rows.append(["# " + res.spec.describe()])
        rows.append(["position", "word", "fwd_top_before", "fwd_top_after",
                     "fwd_bits_before", "fwd_bits_after", "bwd_top_before", "bwd_top_after",
                     "bwd_bits_before", "bwd_bits_after"])
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


def write_figure(m: UnitsModel, path, options=None) -> List[Path]:
    fig = gates_figure(m)
    if fig is None:
        raise LookupError("nothing to export yet")
    return figures.save(fig, path, style=options.style() if options is not None else None)
