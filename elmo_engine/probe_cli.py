"""``elmo-explorer probe``: per-layer and scalar-mix probes from the command line.

Examples::

    elmo-explorer probe --task pos --train en_ewt-ud-train.conllu.gz \\
        --test en_ewt-ud-dev.conllu --label upos --control --max-sentences 3000 --out pos.json
    elmo-explorer probe --task wsd --train semcor.data.xml.gz --train-keys semcor.gold.key.txt.gz \\
        --test semeval2007.data.xml --test-keys semeval2007.gold.key.txt --out wsd.json
    elmo-explorer probe --task demo-pos --out demo_pos.json
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Callable, Dict, List, Optional

from elmo_engine.errors import InputError

TASKS = ("pos", "wsd", "tsv", "demo-pos", "demo-wsd", "demo-supersense")


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``probe`` subcommand to an argparse subparsers object."""
    p = subparsers.add_parser(
        "probe", help="train per-layer and scalar-mix probes (POS, word sense, any TSV task)",
        description="Embed labelled sentences once, train a linear probe on every biLM layer and "
                    "a scalar-mix probe, and write the scores and layer weights as JSON.")
    p.add_argument("--checkpoint", type=Path, default=None,
                   help="checkpoint folder or file (default: the bundled demo model)")
    p.add_argument("--task", choices=TASKS, required=True,
                   help="pos: CoNLL-U; wsd: framework XML + keys; tsv: token<TAB>label; "
                        "demo-*: the built-in WordNet example-sentence tasks")
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
    p.add_argument("--control", action="store_true",
                   help="also train on a control task (Hewitt & Liang 2019) and report selectivity")
    p.add_argument("--max-sentences", type=int, default=None,
                   help="use a seeded random subset of this many training sentences")
    p.add_argument("--hidden", type=int, default=0,
                   help="hidden units of an MLP probe (default 0: linear softmax regression)")
    p.add_argument("--epochs", type=int, default=30, help="most epochs (default 30)")
    p.add_argument("--patience", type=int, default=3, help="early-stopping patience (default 3)")
    p.add_argument("--batch-size", type=int, default=None,
                   help="examples per Adam step (default 256; 1024 for WSD, whose softmax over "
                        "every training sense makes each step costly)")
    p.add_argument("--lr", type=float, default=3e-3, help="Adam learning rate of the classifiers")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-layer-norm", action="store_true",
                   help="do not scale each layer to zero mean / unit variance before probing")
    p.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: cuda if available)")
    p.add_argument("--threads", type=int, default=None,
                   help="torch CPU threads (default: torch's choice; 1 is fastest on a busy machine)")
    p.add_argument("--out", type=Path, required=True, help="results JSON to write")
    p.set_defaults(func=run)
    return p


def _default_checkpoint() -> Path:
    try:
        from elmo_engine.resources import demo_checkpoint_path
    except ImportError:
        raise InputError("no bundled demo model in this installation; pass --checkpoint") from None
    return Path(demo_checkpoint_path())


def _need(path: Optional[Path], flag: str, task: str) -> Path:
    if path is None:
        raise InputError(f"--task {task} needs {flag}")
    return path


def load_task_data(args) -> Dict[str, object]:
    """Read the train/dev/test sentences the arguments name; returns a dict for probe_sentences."""
    from elmo_engine.datasets import demo, tsv, wsd
    from elmo_engine.datasets.conllu import read_conllu

    task = args.task
    if task.startswith("demo-"):
        name = task[len("demo-"):]
        if name == "wsd":
            return {"train": demo.load_demo_wsd("train"), "dev": demo.load_demo_wsd("dev"),
                    "test": demo.load_demo_wsd("test"), "first_sense_fn": demo.demo_first_sense,
                    "label": "sense"}
        return {"train": demo.load_demo_task(name, "train"), "dev": demo.load_demo_task(name, "dev"),
                "test": demo.load_demo_task(name, "test"), "label": name}
    train_p, test_p = _need(args.train, "--train", task), _need(args.test, "--test", task)
    if task == "pos":
        def read(p):
            return list(read_conllu(p, label=args.label))
        label = args.label
    elif task == "tsv":
        def read(p):
            return list(tsv.read_tsv(p))
        label = "label"
    else:
        from elmo_engine.datasets.wordnet import load_wordnet

        wn = load_wordnet(args.wordnet)
        keys = {args.train: _need(args.train_keys, "--train-keys", task),
                args.test: _need(args.test_keys, "--test-keys", task)}
        if args.dev is not None:
            keys[args.dev] = _need(args.dev_keys, "--dev-keys", task)

        def read(p):
            return list(wsd.read_wsd(p, keys[p], wordnet=wn))
        return {"train": read(train_p), "test": read(test_p),
                "dev": read(args.dev) if args.dev else None,
                "first_sense_fn": wn.first_sense, "label": "sense"}
    return {"train": read(train_p), "test": read(test_p),
            "dev": read(args.dev) if args.dev else None, "label": label}


@dataclass
class ProbeTask:
    """A task the panel can train: a name and a loader run on the worker (see probe_cli)."""

    name: str
    task: str                                    # "pos", "tsv", "wsd", "demo-pos", …
    load: Callable[[], Dict[str, object]]
    semantic: bool = False
    options: Dict[str, object] = field(default_factory=dict)


def demo_task(kind: str) -> ProbeTask:
    """The built-in demo task ``pos``, ``wsd`` or ``supersense``."""
    names = {"pos": "Demo: part of speech", "wsd": "Demo: word sense",
             "supersense": "Demo: supersense"}
    task = f"demo-{kind}"
    return ProbeTask(names[kind], task, lambda: load_task_data(SimpleNamespace(task=task)),
                     semantic=kind != "pos")


def file_task(task: str, train: str, test: str, train_keys: str = "", test_keys: str = "",
              label: str = "upos") -> ProbeTask:
    """A task from the user's files (read on the worker)."""
    args = SimpleNamespace(task=task, train=Path(train), test=Path(test), dev=None,
                           train_keys=Path(train_keys) if train_keys else None,
                           test_keys=Path(test_keys) if test_keys else None, dev_keys=None,
                           label=label, wordnet=None)
    return ProbeTask(f"{task}: {Path(train).name} → {Path(test).name}", task,
                     lambda: load_task_data(args), semantic=task == "wsd")


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
                                  unit="step", dynamic_ncols=True)
        self.bar.total = total
        self.bar.n = done
        if ":" in message:
            self.bar.set_postfix_str(message.split(":", 1)[1].strip(), refresh=False)
        self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def run(args) -> int:
    """Run the probe described by parsed arguments; write ``args.out``; return 0."""
    import torch

    from elmo_engine.checkpoint import load_checkpoint
    from elmo_engine.embedder import Embedder, pick_device
    from elmo_engine.probes import ProbeConfig, probe_sentences
    from elmo_engine.progress import TaskState

    if args.max_sentences is not None and args.max_sentences < 2:
        raise InputError("--max-sentences must be at least 2")
    if args.batch_size is None:
        args.batch_size = 1024 if args.task.endswith("wsd") else 256
    if args.epochs < 1 or args.patience < 1 or args.batch_size < 1 or args.hidden < 0:
        raise InputError("--epochs, --patience and --batch-size must be positive, --hidden >= 0")
    if args.threads is not None:
        if args.threads < 1:
            raise InputError("--threads must be at least 1")
        torch.set_num_threads(args.threads)
    data = load_task_data(args)
    device = pick_device(args.device)
    model = load_checkpoint(args.checkpoint or _default_checkpoint(), device=device)
    # a small activation cache: only the labelled tokens' vectors are kept by the probe
    embedder = Embedder(model, device=str(device), cache_size=512)
    config = ProbeConfig(seed=args.seed, epochs=args.epochs, patience=args.patience,
                         batch_size=args.batch_size, lr=args.lr, hidden=args.hidden,
                         layer_norm=not args.no_layer_norm, control=args.control,
                         device=str(device))
    bars = _Bars()
    state = TaskState(bars)
    try:
        result = probe_sentences(
            embedder, data["train"], data["test"], data.get("dev"), task=args.task, config=config,
            name=args.task, label=str(data.get("label", "")), max_train_sentences=args.max_sentences,
            first_sense_fn=data.get("first_sense_fn"), state=state)
    finally:
        bars.close()
    result.config["checkpoint"] = str(args.checkpoint) if args.checkpoint else "demo"
    result.config["torch_threads"] = torch.get_num_threads()
    result.write_json(args.out)
    print(summary(result), file=sys.stderr)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


def summary(result) -> str:
    """A small text table of the results."""
    metric = "F1" if result.is_wsd else "acc"
    lines = [f"{result.name}: {result.counts['train']} train / {result.counts['dev']} dev / "
             f"{result.counts['test']} test examples, {result.counts['labels']} labels, "
             f"{result.wall_time_s:.1f} s"]
    head = f"{'layer':>6} {'dev':>7} {'test ' + metric:>9}"
    if result.is_wsd:
        head += f" {'centroid':>9}"
    if result.layers[0].control_test is not None:
        head += f" {'control':>8} {'select.':>8}"
    lines.append(head)
    rows: List[tuple] = [(str(lay.layer), lay) for lay in result.layers] + [("mix", result.mix)]
    for name, r in rows:
        line = f"{name:>6} {r.dev:7.4f} {r.test:9.4f}"
        if result.is_wsd:
            line += f" {r.centroid_test:9.4f}"
        if r.control_test is not None:
            line += f" {r.control_test:8.4f} {r.selectivity:8.4f}"
        lines.append(line)
    lines.append("mix weights " + " ".join(f"{w:.3f}" for w in result.mix.weights)
                 + f", gamma {result.mix.gamma:.3f}")
    lines.append("baselines " + ", ".join(f"{k} {v:.4f}" for k, v in result.baselines.items()))
    return "\n".join(lines)


RESULT_COLUMNS = ("run", "task", "layer", "mix weight", "dev", "test", "centroid F1", "control",
                  "selectivity", "baselines")


def results_rows(results) -> List[List[str]]:
    """A table of runs (columns :data:`RESULT_COLUMNS`): one row per layer and one for the mix."""
    def f(v):
        return "" if v is None else f"{v:.4f}"

    rows = []
    for i, run in enumerate(results, start=1):
        base = ", ".join(f"{k} {v:.3f}" for k, v in run.baselines.items())
        for lay in run.layers:
            rows.append([str(i), run.name, str(lay.layer), f(run.mix.weights[lay.layer]),
                         f(lay.dev), f(lay.test), f(lay.centroid_test), f(lay.control_test),
                         f(lay.selectivity), base])
        m = run.mix
        rows.append([str(i), run.name, f"mix (γ={m.gamma:.3f})", "1.0000", f(m.dev), f(m.test),
                     f(m.centroid_test), f(m.control_test), f(m.selectivity), base])
    return rows


def write_results_csv(results, path) -> None:
    """The :func:`results_rows` table as CSV, written atomically."""
    import csv
    import io

    from elmo_engine.atomic import atomic_write_text

    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(RESULT_COLUMNS)
    writer.writerows(results_rows(results))
    atomic_write_text(path, buf.getvalue())


def write_results_json(results, path) -> None:
    """A JSON list of ``results.json`` objects, written atomically."""
    import json

    from elmo_engine.atomic import atomic_write_text

    atomic_write_text(path, json.dumps([r.to_dict() for r in results], indent=2,
                                       ensure_ascii=False) + "\n")


__all__ = ["RESULT_COLUMNS", "TASKS", "ProbeTask", "add_parser", "demo_task", "file_task",
           "load_task_data", "results_rows", "run", "summary", "write_results_csv",
           "write_results_json"]
