"""The Layers results as plain text: the tables ``elmo-explorer layers`` prints, and a per-word CSV.

Inputs are the result objects of :mod:`.contextuality`, :mod:`.cka` and :mod:`.mdl`.
"""
from __future__ import annotations

import math
from typing import List, Optional

def _f(v: Optional[float], width: int = 7) -> str:
    if v is None or not math.isfinite(v):
        return "—".rjust(width)
    return f"{v:{width}.3f}"


def format_report(ctx, cka, compare=None, mdl=None, hubness=None) -> str:
    """The results as plain-text tables (``hubness``: a
    :class:`~elmo_engine.analysis.layers.hubness.HubnessResult`, or None)."""
    lines = [f"contextuality: {ctx.n_sentences} sentences, {ctx.n_tokens} tokens, "
             f"{len(ctx.words)} words with ≥ {ctx.settings['min_count']} occurrences "
             "(value / anisotropy baseline / adjusted)",
             f"{'layer':>5} {'dir':<8} {'self-sim':>23} {'intra-sentence':>23} {'MEV':>23}"]
    for r in ctx.rows:
        cells = [f"{_f(m.value)} {_f(m.baseline)} {_f(m.adjusted)}" for m in
                 (r.self_similarity, r.intra_sentence_similarity, r.max_explainable_variance)]
        lines.append(f"{r.layer:>5} {r.direction:<8} " + " ".join(cells))
    lines.append("")
    lines += _matrix_lines(f"CKA ({'unbiased' if cka.unbiased else 'biased'}, {cka.n_tokens} "
                           f"tokens of {cka.n_sentences} sentences)", cka)
    if compare is not None:
        lines.append("")
        lines += _matrix_lines("cross-model CKA (rows: model A, columns: model B = "
                               f"{compare['model']['checkpoint']})", compare["cka"])
    if hubness is not None:
        lines += [""] + hubness_lines(hubness)
    if mdl is not None:
        lines += ["", f"MDL ({mdl.extra.get('task')}: {mdl.n_examples} examples, "
                  f"{len(mdl.classes)} labels, uniform code {mdl.uniform_bits / 1000:.1f} kbit)",
                  f"{'probe':>8} {'online kbit':>12} {'compression':>12} {'last-block acc':>15}"]
        for c in mdl.layers + ([mdl.mix] if mdl.mix is not None else []):
            lines.append(f"{c.name:>8} {c.online_bits / 1000:12.2f} {c.compression:12.3f} "
                         f"{c.final_block_accuracy:15.4f}")
        if mdl.mix is not None:
            lines.append("mix weights " + " ".join(f"{w:.3f}" for w in mdl.mix.weights)
                         + f", gamma {mdl.mix.gamma:.3f}")
    return "\n".join(lines)


def _matrix_lines(title: str, res) -> List[str]:
    width = max(9, *(len(c) + 1 for c in res.columns))
    out = [title, " " * 12 + "".join(c.rjust(width) for c in res.columns)]
    for name, row in zip(res.rows, res.matrix):
        out.append(name[-12:].ljust(12) + "".join(_f(v, width) for v in row))
    return out


def hubness_lines(h) -> List[str]:
    """Per layer: the skewness of N_k, the share of anti-hubs, the largest N_k and the top hubs
    (token and count; their contexts are in the JSON)."""
    out = [f"hubness (k={h.k}, {h.n:,} of {h.n_total:,} tokens, sample seed {h.seed}, "
           f"{h.metric}): skewness of N_k; anti-hubs: N_k = 0",
           f"{'layer':>5} {'skewness':>9} {'anti-hubs':>10} {'max N_k':>8}  top hubs (N_k)"]
    for lay in h.layers:
        hubs = ", ".join(f"{x.token} ({x.count})" for x in lay.hubs[:5])
        out.append(f"{lay.layer:>5} {lay.skewness:9.2f} {100 * lay.anti_hubs:9.1f}% "
                   f"{lay.max_count:8d}  {hubs}")
    return out


def hubness_tsv(h: dict) -> str:
    """Every layer's top hubs as TSV (``h``: the ``hubness`` object of ``layers --json``):
    layer, skewness, k, n, rank, token, N_k, context."""
    rows = ["layer\tskewness\tk\tn\trank\ttoken\tN_k\tcontext"]
    for lay in h["layers"]:
        for r, x in enumerate(lay["hubs"], 1):
            cells = [str(lay["layer"]), f"{lay['skewness']:.4f}", str(h["k"]), str(h["n"]),
                     str(r), x["token"], str(x["count"]), x.get("context", "")]
            rows.append("\t".join(c.replace("\t", " ").replace("\n", " ") for c in cells))
    return "\n".join(rows) + "\n"


def words_csv(ctx) -> str:
    """Per-word self-similarity and MEV on every layer and direction, as CSV text."""
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf)
    cols = [f"{m}_l{r.layer}_{r.direction}" for m in ("selfsim", "mev") for r in ctx.rows]
    w.writerow(["word", "count", *cols])
    for j, word in enumerate(ctx.words):
        vals = [*ctx.word_self_similarity[:, j], *ctx.word_mev[:, j]]
        w.writerow([word, int(ctx.counts[j]), *(f"{v:.6f}" for v in vals)])
    return buf.getvalue()


__all__ = ["format_report", "hubness_lines", "hubness_tsv", "words_csv"]
