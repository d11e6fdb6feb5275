"""``elmo-explorer info [--checkpoint C] [--check] [--json] [-o FILE]``: options, parameter
counts per part, checksum, and this host's CPU with whether its flags name bf16 units
(``--precision bf16`` on the CPU).

Read from the files' headers without torch (:func:`~elmo_engine.model.header.read_checkpoint_info`),
so it answers in well under a second; the weights' values are checked when a model is loaded.

Readable text by default; ``--json`` prints the same facts as one JSON object for machines.
"""
from __future__ import annotations

from typing import List

from elmo_engine.cli import common


def add_parser(sub) -> None:
    p = sub.add_parser("info", help="print a checkpoint's options, parameter counts and checksum")
    common.add_checkpoint(p)
    p.add_argument("--check", action="store_true",
                   help="also load the model and embed a test sentence: the weights' values are "
                   "read and checked finite (seconds; without it only the headers are read)")
    common.add_json(p)
    common.add_results_out(p)
    p.set_defaults(func=run)


def _size(n: int) -> str:
    for unit, step in (("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
        if n >= step:
            return f"{n / step:.1f} {unit}"
    return f"{n} B"


def _count(n: int) -> str:
    return f"{n / 1e6:.2f} M" if n >= 100_000 else f"{n:,}"


def format_info(d: dict) -> str:
    """The :meth:`CheckpointInfo.describe` dict as a short readable text."""
    o = d["options"]
    filters = o["filters"]
    n_filters = sum(int(k) for _, k in filters)
    projected = o["projection_dim"] < o["lstm_dim"]
    out_dim = o["projection_dim"] if projected else o["lstm_dim"]
    # without a projection (P = D) the cell's output is the layer's, and proj_clip has no effect
    projection = f"projection {o['projection_dim']}" if projected else \
        f"no projection (P = D = {o['lstm_dim']})"
    clips = ", ".join(f"{what} clip {'none' if value is None else value}" for what, value in
                      (("cell", o["cell_clip"]),
                       *((("projection", o["proj_clip"]),) if projected else ())))
    lines: List[str] = [
        f"{d['name']} ({d['format']} checkpoint)",
        f"  options   {d['options_path']}",
        f"  weights   {d['weights_path']} ({_size(int(d['weights_bytes']))})",
        f"  SHA-256   {d['checksum']}",
        "",
        "architecture",
        f"  characters   {o['max_characters_per_token']} per token, {o['n_characters']} ids, "
        f"embedding {o['char_embed_dim']}",
        f"  char CNN     {_n(len(filters), 'width')} "
        f"({', '.join(f'{w}×{k}' for w, k in filters)}) = {_n(n_filters, 'filter')}, "
        f"{o['activation']}",
        f"  highway      {_n(o['n_highway'], 'layer')}",
        f"  biLSTM       {_n(o['n_layers'], 'layer')}, cell {o['lstm_dim']}, {projection}, "
        f"{clips}, skip connections {'on' if o['use_skip_connections'] else 'off'}",
        f"  output       {o['n_layers'] + 1} layers (0 = token layer) × {2 * out_dim} dims "
        "(forward ‖ backward)",
        "",
        "parameters",
    ]
    counts = d.get("parameter_counts") or {}
    width = max((len(k) for k in counts), default=5)
    for part, n in counts.items():
        lines.append(f"  {part:<{width}}  {_count(int(n)):>10}")
    return "\n".join(lines)


def _n(count: int, noun: str) -> str:
    """``1 layer``, ``3 layers``, ``0 layers``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def run(args) -> int:
    # headers only, no torch: the weights' shapes and types are checked against the options,
    # the values are read (and checked finite) when a command loads the model
    from elmo_engine.cli.common import checkpoint_or_demo
    from elmo_engine.model.header import read_checkpoint_info
    from elmo_engine.runtime import cpu_bf16_from_flags

    path = checkpoint_or_demo(args.checkpoint)
    d = read_checkpoint_info(path).describe()
    if args.check:                                   # reads every value, embeds PROBE_SENTENCE
        from elmo_engine.model.checkpoint import load_checkpoint

        load_checkpoint(path, device="cpu")
    d["values_checked"] = bool(args.check)
    cpu = cpu_bf16_from_flags()
    if args.json:
        d["host"] = {"cpu": cpu.model, "cpu_flags": list(cpu.flags), "bf16_units": cpu.units,
                     "cpu_precisions": ["fp32", "bf16"] if cpu.offered else ["fp32"]}
        common.print_json(d)
    else:
        checked = ("read and checked: finite, and a test sentence embeds to finite vectors"
                   if args.check else "not read (headers only; --check loads the model and "
                   "checks them)")
        print(format_info(d) + "\n\nweights' values\n  " + checked + "\n\nhost\n  "
              + cpu.describe())
    return 0
