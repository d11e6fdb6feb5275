"""``elmo-explorer probe``: per-layer and scalar-mix probes from the command line.

Examples::

    elmo-explorer probe --task pos --train en_ewt-ud-train.conllu.gz \\
        --test en_ewt-ud-dev.conllu --label upos --control --max-sentences 3000 -o pos.json
    elmo-explorer probe --task wsd --train semcor.data.xml.gz --train-keys semcor.gold.key.txt.gz \\
        --test semeval2007.data.xml --test-keys semeval2007.gold.key.txt -o wsd.json
    elmo-explorer probe --task demo-pos --json > demo_pos.json
    elmo-explorer probe --task demo-pos --cumulative --figure usefulness.png -o demo_pos.json

The summary table goes to stdout; ``--json`` prints the results JSON there instead, ``-o FILE``
writes it to FILE (``-o -``: to stdout, the summary then on stderr).
"""
from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

from elmo_engine.analysis.probes.settings import CONTROL_BY_DEFAULT
from elmo_engine.analysis.probes.tasks import TASKS
from elmo_engine.cli import common
from elmo_engine.errors import InputError


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``probe`` subcommand to an argparse subparsers object."""
    p = subparsers.add_parser(
        "probe", help="train per-layer and scalar-mix probes (POS, word sense, any TSV task)",
        description="Embed labelled sentences once, train a linear probe on every biLM layer and "
                    "a scalar-mix probe, and write the scores and layer weights as JSON.")
    common.add_checkpoint(p)
    p.add_argument("--task", choices=TASKS, required=True,
                   help="pos: CoNLL-U; wsd: framework XML + keys; tsv: token<TAB>label; "
                        "demo-*: the built-in tasks (EWT UPOS; 20 ambiguous SemCor lemmas)")
    p.add_argument("--train", type=Path, help="training file (not for demo tasks)")
    p.add_argument("--train-keys", type=Path, help="gold keys of the training XML (wsd)")
    p.add_argument("--dev", type=Path,
                   help="dev file for early stopping (default: 10%% of the training sentences)")
    p.add_argument("--dev-keys", type=Path, help="gold keys of the dev XML (wsd)")
    p.add_argument("--test", type=Path, help="file the scores are reported on")
    p.add_argument("--test-keys", type=Path, help="gold keys of the test XML (wsd)")
    p.add_argument("--label", choices=["upos", "xpos", "deprel"], default="upos",
                   help="CoNLL-U column to predict (pos task; default upos)")
    p.add_argument("--wordnet", type=Path, default=None,
                   help="WordNet 3.0 (wordnet.zip or a folder with index.sense) for WSD candidates "
                        "and the first-sense fallback (default: $ELMO_WORDNET, ../shared, "
                        "/usr/share/wordnet)")
    p.add_argument("--control", action=argparse.BooleanOptionalAction,
                   default=CONTROL_BY_DEFAULT,
                   help="also train on a control task (Hewitt & Liang 2019) and report "
                        "selectivity (default: on, as the app's Probes view; --no-control to "
                        "train the task alone, in about half the time)")
    p.add_argument("--cumulative", action="store_true",
                   help="usefulness beside identity: also train a scalar-mix probe on layers "
                        "0..l for every l (cumulative scoring, Tenney et al. 2019), the control "
                        "task and online-code MDL probes, and print the cumulative scores, the "
                        "gains of each layer and both expected layers (JSON: 'usefulness')")
    p.add_argument("--figure", type=Path, default=None, metavar="FILE",
                   help="with --cumulative: write the usefulness figure (.png, .svg or .pdf)")
    p.add_argument("--max-sentences", type=int, default=None,
                   help="use a seeded random subset of this many training sentences")
    p.add_argument("--hidden", type=int, default=0,
                   help="hidden units of an MLP probe (default 0: linear softmax regression)")
    p.add_argument("--seeds", type=int, default=3,
                   help="train every probe with this many seeds (--seed, --seed+1, …) and report "
                        "mean ± sd (default 3)")
    p.add_argument("--mix-min-epochs", type=int, default=None,
                   help="the scalar-mix probe trains at least this many epochs, then stops "
                        "early on dev loss (default 10; 3 for wsd)")
    p.add_argument("--epochs", type=int, default=30, help="most epochs (default 30)")
    p.add_argument("--patience", type=int, default=3, help="early-stopping patience (default 3)")
    p.add_argument("--min-delta", type=float, default=None,
                   help="a dev-accuracy gain under this does not restart the patience (default "
                        "0; 0.005 for wsd)")
    p.add_argument("--batch-size", type=int, default=None,
                   help="examples per Adam step (default 256; 1024 for wsd)")
    p.add_argument("--lr", type=float, default=None,
                   help="Adam learning rate of the classifiers (default 3e-3; 1e-3 for pos, "
                        "demo-pos and wsd)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-layer-norm", action="store_true",
                   help="do not scale each layer to zero mean / unit variance before probing")
    common.add_device(p)
    common.add_precision(p)
    p.add_argument("--threads", type=int, default=None,
                   help="torch CPU threads (default: torch's choice; 1 is fastest on a busy machine)")
    common.add_json(p)
    common.add_out(p, "write the results JSON to FILE ('-': stdout)", required=False)
    common.add_force(p, "--out if it exists")
    p.set_defaults(func=run, _parser=p)
    return p


class _Bars:
    """tqdm bars driven by TaskState reports; a new bar whenever the phase changes."""

    def __init__(self):
        from tqdm import tqdm

        self._tqdm = tqdm
        self.bar = None
        self.phase = None

    def __call__(self, done: int, total: int, message: str) -> None:
        phase = message.split("(")[0].split(":")[0].strip() or "working"
        if phase != self.phase or self.bar is None:
            self.close()
            self.phase = phase
            self.bar = self._tqdm(total=total, desc=phase, file=sys.stderr, leave=False,
                                  unit=self.unit(phase), dynamic_ncols=True)
        self.bar.total = total
        self.bar.n = done
        if ":" in message:
            self.bar.set_postfix_str(message.split(":", 1)[1].strip(), refresh=False)
        self.bar.refresh()

    @staticmethod
    def unit(phase: str) -> str:
        """What a phase counts: sentences while embedding, epochs while training."""
        if phase.startswith("embedding"):
            return "sentence"
        return "epoch" if phase.split()[-1] in ("layers", "mix") else "step"

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def command_line(args) -> str:
    """The command that gives these results (``elmo-explorer probe …``, every option that differs
    from its default, as parsed), for the results' ``command`` field."""
    parts = ["elmo-explorer", "probe"]
    for action in args._parser._actions:
        if not action.option_strings or action.dest in ("help",):
            continue
        value = getattr(args, action.dest, None)
        if value == action.default or value is None:
            continue
        flag = action.option_strings[-1]
        if isinstance(action, argparse._StoreTrueAction):
            parts.append(flag)
        else:
            parts += [flag, str(value)]
    return " ".join(shlex.quote(a) for a in parts)


def time_split(result) -> str:
    """One line: where the wall time went."""
    t = result.timings
    parts = [f"{name} {t[key]:.1f} s" for name, key in (
        ("reading", "reading_s"), ("embedding", "embedding_s"), ("training", "training_s"),
        ("scoring", "scoring_s")) if key in t]
    return f"time: {result.wall_time_s:.1f} s = " + " + ".join(parts)


def run(args) -> int:
    """Run the probe described by parsed arguments; write ``args.out``; return 0."""
    common.refuse_existing(args.force, args.out)        # at once, before torch is loaded
    if args.figure is not None:
        if not args.cumulative:
            raise InputError("--figure draws the usefulness table: it needs --cumulative")
        if args.figure.suffix.lower() not in (".png", ".svg", ".pdf"):
            raise InputError("--figure must end in .png, .svg or .pdf", path=args.figure)
        common.refuse_existing(args.force, args.figure)
    from elmo_engine.analysis.probes.tasks import TaskFiles

    files = TaskFiles(args.task, args.train, args.test, args.dev, args.train_keys, args.test_keys,
                      args.dev_keys, args.label, args.wordnet)
    files.check()                                        # a missing file option: at once
    import torch

    from elmo_engine import runtime
    from elmo_engine.analysis.probes.experiment import ProbeConfig, probe_sentences
    from elmo_engine.analysis.probes.tables import summary
    from elmo_engine.analysis.probes.tasks import load_task_data
    from elmo_engine.cli.common import checkpoint_or_demo
    from elmo_engine.embed.embedder import Embedder
    from elmo_engine.model.checkpoint import load_checkpoint
    from elmo_engine.progress import TaskState

    if args.max_sentences is not None and args.max_sentences < 2:
        raise InputError("--max-sentences must be at least 2")
    defaults = ProbeConfig().for_task(args.task)
    for name in ("batch_size", "lr", "mix_min_epochs", "min_delta"):
        if getattr(args, name) is None:
            setattr(args, name, getattr(defaults, name))
    if (args.epochs < 1 or args.patience < 1 or args.batch_size < 1 or args.hidden < 0
            or args.seeds < 1 or args.mix_min_epochs < 1 or not args.min_delta >= 0):
        raise InputError("--epochs, --patience, --batch-size, --seeds and --mix-min-epochs must "
                         "be positive, --hidden and --min-delta >= 0")
    if args.threads is not None:
        if args.threads < 1:
            raise InputError("--threads must be at least 1")
        runtime.configure(threads=args.threads)
    device = common.resolve_device(args.device)
    common.resolve_precision(args.precision, device)
    t0 = time.perf_counter()
    data = load_task_data(files)
    reading_s = time.perf_counter() - t0
    model = load_checkpoint(checkpoint_or_demo(args.checkpoint), device=device)
    # a small activation cache: only the labelled tokens' vectors are kept by the probe
    embedder = Embedder(model, device=str(device), cache_size=512, precision=args.precision)
    config = ProbeConfig(seed=args.seed, epochs=args.epochs, patience=args.patience,
                         batch_size=args.batch_size, lr=args.lr, hidden=args.hidden,
                         layer_norm=not args.no_layer_norm, control=args.control,
                         device=str(device), n_seeds=args.seeds,
                         mix_min_epochs=args.mix_min_epochs, min_delta=args.min_delta)
    bars = _Bars()
    state = TaskState(bars)
    try:
        result = probe_sentences(
            embedder, data.train, data.test, data.dev, task=args.task, config=config,
            name=args.task, label=data.label, max_train_sentences=args.max_sentences,
            first_sense_fn=data.first_sense_fn, state=state, cumulative=args.cumulative)
    finally:
        bars.close()
    result.config["checkpoint"] = str(args.checkpoint) if args.checkpoint else "demo"
    result.config["torch_threads"] = torch.get_num_threads()
    result.config["precision"] = args.precision
    result.timings = {"reading_s": reading_s, **result.timings}
    result.wall_time_s += reading_s
    result.command = command_line(args)
    text = summary(result)
    if result.usefulness is not None:
        from elmo_engine.analysis.probes.usefulness import usefulness_text

        text += "\n\n" + usefulness_text(result.usefulness)
    if args.json or common.is_stdout(args.out):                # the results JSON: stdout
        common.print_json(result.to_dict())
        common.log(text)
    else:
        print(text)                                           # the result: stdout
    common.log(time_split(result))
    if args.out is not None and not common.is_stdout(args.out):
        result.write_json(args.out)
        common.log(f"wrote {args.out}")
    if args.figure is not None and result.usefulness is not None:
        from elmo_engine.io import figures
        from elmo_engine.io.figures.usefulness import usefulness_results_figure

        figures.save(usefulness_results_figure([result]), args.figure)
        common.log(f"wrote {args.figure}")
    return 0
