"""``elmo-explorer info [CHECKPOINT]``: options, parameter counts per part, checksum."""
from __future__ import annotations

import json
from pathlib import Path


def add_parser(sub) -> None:
    p = sub.add_parser("info", help="print a checkpoint's options, parameter counts and checksum")
    p.add_argument("checkpoint", type=Path, nargs="?", default=None,
                   help="checkpoint folder or file (default: the bundled demo model)")
    p.set_defaults(func=run)


def run(args) -> int:
    from elmo_engine.cli.common import checkpoint_or_demo
    from elmo_engine.model.checkpoint import load_checkpoint

    model = load_checkpoint(checkpoint_or_demo(args.checkpoint))
    print(json.dumps(model.info.describe(), indent=2))
    return 0
