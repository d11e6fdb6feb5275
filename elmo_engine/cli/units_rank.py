"""``elmo-explorer units rank``: which units of an LSTM state carry a labelled property — a
probe on all units, the units ranked by an elastic net and by the class-mean difference, and
the top-k curve against k random units (docs/guide/units.md). The options are declared with the
other ``units`` commands in :mod:`elmo_engine.cli.units`.
"""
from __future__ import annotations

from elmo_engine.cli import common
from elmo_engine.cli.units import (_check_layers, _directions, _ints, _labelled, _load_model,
                                   _token_vectors)
from elmo_engine.errors import InputError


def run_rank(args) -> int:
    from elmo_engine.model.lstm_states import parse_states

    _check_figure(args)
    kinds = parse_states(args.states)
    ks = _ints(args.k, "--k", low=1)
    layers = None if args.layer is None else _ints(args.layer, "--layer")
    opts = common.checkpoint_options(args.checkpoint)
    if layers is not None:
        _check_layers(layers, opts)                                         # before torch
    from elmo_engine.model.lstm_states import state_width

    widths = sorted({state_width(opts, kind) for kind in kinds})
    if min(ks) > widths[-1]:
        raise InputError(f"--k {min(ks)}: the states asked for have at most {widths[-1]} units")
    sents = _labelled(args)
    over = [k for k in ks if k > widths[0]]
    if over:                      # the curve of a state stops at its width: say so, once
        common.log(f"units rank: --k {', '.join(map(str, over))} over the {widths[0]} units of "
                   "a state asked for: its curve stops at its width")

    from elmo_engine.analysis.units.collect import collect
    from elmo_engine.analysis.units.rank import RankSettings, rank_units, ranking_json

    model = _load_model(args)
    data = collect(model, sents, kinds, layers=layers, directions=_directions(args.direction),
                   max_tokens=args.max_tokens, max_bytes=args.max_mib << 20,
                   token_vectors=_token_vectors(model, str(model.device)))
    common.log(f"units rank: {len(data)} labelled tokens, {len(data.classes)} classes")
    results = rank_units(data, RankSettings(ks=ks, seeds=args.seeds))
    rankings = [ranking_json(r, args.show) for r in results]
    if args.figure is not None:
        _write_figure(args, rankings, len(data), data.classes)
    if args.json:
        common.print_json({"tokens": len(data), "classes": list(data.classes),
                           "rankings": rankings})
        return 0
    print(f"{len(data)} tokens, {len(data.classes)} classes; held-out accuracy on all units "
          "(elastic net) and the top-k curve (top / random mean ± sd)")
    for r in rankings:
        print(f"\nlayer {r['layer']} {r['direction']} {r['state']}: all units "
              f"{r['accuracy_all']:.3f} (majority {r['majority']:.3f})")
        for method, units in r["top_units"].items():
            print(f"  {method:<12} top units: {' '.join(str(u) for u in units)}")
        for p in r["curve"]:
            print(f"  k={p['k']:<4} {p['method']:<12} top {p['top']:.3f}   random "
                  f"{p['random_mean']:.3f} ± {p['random_sd']:.3f}")
    return 0


def _check_figure(args) -> None:
    if args.figure is not None:
        if args.figure.suffix.lower() not in (".png", ".svg", ".pdf"):
            raise InputError(f"--figure {args.figure}: name a .png, .svg or .pdf file")
        common.refuse_existing(args.force, args.figure)


def _write_figure(args, rankings, tokens: int, classes) -> None:
    from elmo_engine.io import figures
    from elmo_engine.io.figures.units import topk_figure

    fig = topk_figure(rankings, f"{tokens:,} tokens, {len(classes)} classes: a probe on the "
                                "top-k units against k random units (held out)")
    for path in figures.save(fig, args.figure):
        common.log(f"units rank: wrote {path}")
