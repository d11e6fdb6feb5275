"""``elmo-explorer units ablate``: Lakretz et al.'s experiment on the model at hand (issue 40,
docs/guide/units.md): rank the units for a property in each direction, zero the top-k and k
random units in the live biLM, score the minimal pairs per direction, and with ``--probe-layer``
and ``--word`` re-measure a probe's accuracy and a word's similarity across contexts under each
ablation (:mod:`elmo_engine.analysis.units.remeasure`). The options are declared with the other
``units`` commands in :mod:`elmo_engine.cli.units`.
"""
from __future__ import annotations

import sys
from pathlib import Path

from elmo_engine.cli import common
from elmo_engine.cli.units import (DEFAULT_RANK_TOKENS, MAX_SENTENCES, _check_layers, _ints,
                                   _labelled, _load_model, _token_vectors)
from elmo_engine.errors import InputError


def run_ablate(args) -> int:
    from elmo_engine.analysis.language_model.pairs import bundled_pairs, read_pairs
    from elmo_engine.model.lstm_states import INTERVENABLE, parse_states

    kinds = parse_states(args.state)
    if len(kinds) != 1 or kinds[0] not in INTERVENABLE:
        raise InputError("--state takes one of c, m or h")
    kind = kinds[0]
    ks = None if args.k is None else _ints(args.k, "--k", low=1)
    if ks is not None and not ks:
        raise InputError("--k needs at least one number of units")
    files = bundled_pairs() if str(args.pairs) == "bundled" else [args.pairs]
    pairs = [p for f in files for p in read_pairs(f)]
    checkpoint = common.checkpoint_or_demo(args.checkpoint)
    opts = common.checkpoint_options(args.checkpoint)     # the sizes, before torch
    layer = opts.n_layers - 1 if args.layer is None else args.layer
    _check_layers([layer], opts)
    from elmo_engine.analysis.units.sizes import DEFAULT_KS, check_ks, default_ks
    from elmo_engine.model.lstm_states import state_width

    width = state_width(opts, kind)
    if ks is None:                  # the defaults the state's units allow, said when fewer
        ks = default_ks(width, layer, kind)
        if len(ks) < len(DEFAULT_KS):
            common.log(f"units ablate: k = {', '.join(map(str, ks))}: layer {layer}'s "
                       f"{kind.value} has {width} units, and k is at most half of them")
    check_ks(ks, width, layer, kind)                           # before the model loads
    _check_measures(args, opts)                 # before the model, the collecting, the ranking

    from elmo_engine.analysis.units.ablate import ALL, ablation_experiment
    from elmo_engine.analysis.units.collect import collect
    from elmo_engine.analysis.units.rank import Method, RankSettings, rank_units
    from elmo_engine.model.softmax import load_softmax
    from elmo_engine.train.evaluate import model_folder

    model = _load_model(args)
    softmax = load_softmax(model_folder(Path(checkpoint)), output_dim=model.opts.output_dim)
    if any(getattr(args, n) is not None for n in ("conllu", "tsv", "demo")):
        sents = _labelled(args)
    else:                       # EWT train's Number beside the checkout, else the demo POS task
        from elmo_engine.analysis.units.ablate import number_source

        src = number_source(args.max_tokens, MAX_SENTENCES)
        common.log(f"units ablate: no labelled tokens given: {src.name}, label {src.label}")
        sents = list(src.sentences)
    vectors = _token_vectors(model, str(model.device))
    data = collect(model, sents, [kind], layers=[layer], max_tokens=args.max_tokens,
                   max_bytes=args.max_mib << 20, token_vectors=vectors)
    common.log(f"units ablate: ranking on {len(data)} tokens ({', '.join(data.classes)})")
    method = Method(args.method)
    ranked = rank_units(data, RankSettings(ks=()), keys=[(layer, 0, kind), (layer, 1, kind)])
    order = {r.key[1]: [int(u) for u in r.order[method]] for r in ranked}
    measures = _measures(args, model, sents, vectors)
    res = ablation_experiment(model, softmax, pairs, layer, kind, order, ks, seeds=args.seeds,
                              token_vectors=vectors, measures=measures)
    names = ("forward", "backward", "combined")
    sets = list(res.baseline.by_set)
    doc = {"layer": layer, "state": kind.value, "method": method.value, "tokens": len(data),
           "classes": list(data.classes), "pairs": len(pairs), "seeds": args.seeds,
           "accuracy_all_units": {("forward", "backward")[r.key[1]]: r.full for r in ranked},
           "top_units": {("forward", "backward")[d]: list(u) for d, u in res.top_units.items()},
           "baseline": {s: dict(zip(names, res.baseline.by_set[s])) for s in sets},
           "ablated": [{"k": row.k,
                        "top": {s: dict(zip(names, row.top.by_set[s])) for s in sets},
                        "random": {s: {n: {"mean": m, "sd": sd} for n, (m, sd)
                                       in zip(names, row.random_stats(s))} for s in sets}}
                       for row in res.rows]}
    if measures:
        doc["measures"] = {
            name: {"none": res.measures_baseline[name],
                   "ablated": [{"k": row.k, "top": row.measures_top[name],
                                "random": list(row.measures_random[name]),
                                "random_mean": row.measure_stats(name)[0],
                                "random_sd": row.measure_stats(name)[1]} for row in res.rows]}
            for name in measures}
    if args.json:
        common.print_json(doc)
        return 0
    print(f"minimal pairs ({len(pairs)}), layer {layer} {kind.value}, units ranked by "
          f"{method.value} on {len(data)} tokens ({'/'.join(data.classes)}); random: mean ± sd "
          f"over {args.seeds} seeds")
    print(f"top units: forward {list(res.top_units[0][:8])}, backward "
          f"{list(res.top_units[1][:8])}")
    for s in sets:
        print(f"\n{'all sets' if s == ALL else s}")
        print(f"  {'':<14}{'forward':>22}{'backward':>22}{'combined':>22}")
        print(f"  {'none ablated':<14}" + "".join(f"{v:>22.3f}" for v in res.baseline.by_set[s]))
        for row in res.rows:
            print(f"  {f'top {row.k}':<14}" + "".join(f"{v:>22.3f}" for v in row.top.by_set[s]))
            print(f"  {f'random {row.k}':<14}" + "".join(
                f"{f'{m:.3f} ± {sd:.3f}':>22}" for m, sd in row.random_stats(s)))
    for name in measures:
        print(f"\n{name} (both directions' units ablated)")
        print(f"  {'none ablated':<14}{res.measures_baseline[name]:>22.3f}")
        for row in res.rows:
            m, sd = row.measure_stats(name)
            print(f"  {f'top {row.k}':<14}{row.measures_top[name]:>22.3f}")
            print(f"  {f'random {row.k}':<14}{f'{m:.3f} ± {sd:.3f}':>22}")
    sys.stdout.flush()
    return 0


def _check_measures(args, opts) -> None:
    """The options of the extra measures, checked against the model's options before the
    work."""
    top = opts.n_layers
    if args.probe_layer is not None and not 0 <= args.probe_layer <= top:
        raise InputError(f"--probe-layer {args.probe_layer}: the model has representation "
                         f"layers 0 … {top}")
    if args.contexts is not None and args.word is None:
        raise InputError("--contexts names the contexts of --word: give --word too")


def _measures(args, model, sents, vectors) -> dict:
    """The extra measures of ``units ablate`` (``--probe-layer``, ``--word``), by name."""
    from elmo_engine.analysis.units.remeasure import (fit_probe, probe_measure,
                                                      similarity_measure)

    out = {}
    top = model.opts.n_layers
    if args.probe_layer is not None:
        probe = fit_probe(model, sents, args.probe_layer, token_vectors=vectors)
        common.log(f"units ablate: a probe of layer {args.probe_layer} trained on "
                   f"{probe.train_tokens} tokens, scored on {probe.test_tokens}")
        out[f"probe accuracy (layer {args.probe_layer})"] = probe_measure(model, probe, vectors)
    if args.word is not None:
        contexts = ([s.tokens for s in sents] if args.contexts is None
                    else common.read_text(args.contexts, max_tokens=DEFAULT_RANK_TOKENS).tokens)
        out[f"similarity of '{args.word}' across contexts (layer {top})"] = similarity_measure(
            model, args.word, contexts, top, vectors)
    return out
