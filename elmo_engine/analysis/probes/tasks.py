"""Probe tasks: which labelled data a probe trains and is scored on.

A task is either one of the built-in demo tasks (``demo-pos``: EWT UPOS of every token,
``demo-wsd`` / ``demo-supersense``: 20 ambiguous SemCor lemmas; ``resources/demo_tasks``) or the
user's files:
CoNLL-U (``pos``), ``token<TAB>label`` TSV (``tsv``) or the WSD framework's XML + gold keys
(``wsd``). :func:`load_task_data` reads them into a :class:`TaskData`, the arguments of
:func:`~elmo_engine.analysis.probes.experiment.probe_sentences`; :class:`ProbeTask` is a task the
app can offer and load later, on its worker. The kinds are :class:`TaskKind`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Set

from elmo_engine.analysis.probes.kinds import TaskKind
from elmo_engine.errors import InputError

#: the ``probe`` command's --task choices
TASKS = tuple(k.value for k in TaskKind)
FirstSenseFn = Callable[[str, str], Optional[str]]


@dataclass(frozen=True)
class TaskData:
    """A task's sentences, read: ``LabelledSentence`` lists (tagging) or ``WsdSentence`` lists
    (WSD); ``dev`` None: held out of train by the probe; ``label``: what the labels are
    ("upos", "sense", …); ``first_sense_fn``: WSD's ``(lemma, pos) -> sense key``."""

    train: List
    test: List
    dev: Optional[List] = None
    label: str = ""
    first_sense_fn: Optional[FirstSenseFn] = None


@dataclass
class TaskFiles:
    """The data of a task: the task name and its files (the ``probe`` command's options)."""

    task: str                                    # a TaskKind value
    train: Optional[Path] = None
    test: Optional[Path] = None
    dev: Optional[Path] = None
    train_keys: Optional[Path] = None            # WSD gold keys of each XML file
    test_keys: Optional[Path] = None
    dev_keys: Optional[Path] = None
    label: str = "upos"                          # CoNLL-U column of the pos task
    wordnet: Optional[Path] = None               # WSD: WordNet 3.0 (default: found)

    def check(self) -> None:
        """Raise :class:`InputError` for a file the task needs and was not given (before any
        is read, and before the command loads a model)."""
        kind = TaskKind.of(self.task)
        if kind.is_demo:
            return
        _need(self.train, "--train", self.task)
        _need(self.test, "--test", self.task)
        if kind not in (TaskKind.POS, TaskKind.TSV):         # WSD: each split with its keys
            _need(self.train_keys, "--train-keys", self.task)
            _need(self.test_keys, "--test-keys", self.task)
            if self.dev is not None:
                _need(self.dev_keys, "--dev-keys", self.task)


def _need(path: Optional[Path], flag: str, task: str) -> Path:
    if path is None:
        raise InputError(f"--task {task} needs {flag}")
    return path


def load_task_data(files: TaskFiles) -> TaskData:
    """Read the train/dev/test sentences ``files`` names."""
    from elmo_engine.io.datasets import demo, tsv, wsd
    from elmo_engine.io.datasets.conllu import read_conllu

    kind, task = TaskKind.of(files.task), files.task
    if kind.is_demo:
        name = kind.value[len("demo-"):]
        if kind is TaskKind.DEMO_WSD:
            return TaskData(demo.load_demo_wsd("train"), demo.load_demo_wsd("test"),
                            demo.load_demo_wsd("dev"), "sense", demo.demo_first_sense)
        return TaskData(demo.load_demo_task(name, "train"), demo.load_demo_task(name, "test"),
                        demo.load_demo_task(name, "dev"), name)
    train_p, test_p = _need(files.train, "--train", task), _need(files.test, "--test", task)
    if kind is TaskKind.POS:
        def read(p):
            return list(read_conllu(p, label=files.label))
        label = files.label
    elif kind is TaskKind.TSV:
        def read(p):
            return list(tsv.read_tsv(p))
        label = "label"
    else:
        from elmo_engine.io.datasets.wordnet import load_wordnet

        wn = load_wordnet(files.wordnet)
        # each split with its own keys (the same XML may serve two splits with other keys)
        train_k = _need(files.train_keys, "--train-keys", task)
        test_k = _need(files.test_keys, "--test-keys", task)
        dev_k = _need(files.dev_keys, "--dev-keys", task) if files.dev is not None else None

        def read_wsd(p, k):
            return list(wsd.read_wsd(p, k, wordnet=wn))
        return TaskData(read_wsd(train_p, train_k), read_wsd(test_p, test_k),
                        read_wsd(files.dev, dev_k) if files.dev else None, "sense",
                        wn.first_sense)
    data = TaskData(read(train_p), read(test_p), read(files.dev) if files.dev else None, label)
    check_label_count(data.train, train_p)
    return data


@dataclass
class ProbeTask:
    """A task the app can train: a name and a loader run on the worker."""

    name: str
    task: str                                    # a TaskKind value: "pos", "tsv", "wsd", …
    load: Callable[[], TaskData]
    semantic: bool = False
    options: Dict[str, object] = field(default_factory=dict)


def demo_task(kind: str) -> ProbeTask:
    """The built-in demo task ``pos``, ``wsd`` or ``supersense``."""
    names = {"pos": "Demo: part of speech", "wsd": "Demo: word sense",
             "supersense": "Demo: supersense"}
    task = f"demo-{kind}"
    return ProbeTask(names[kind], task, lambda: load_task_data(TaskFiles(task)),
                     semantic=kind != "pos")


def file_task(task: str, train: str, test: str, train_keys: str = "", test_keys: str = "",
              label: str = "upos") -> ProbeTask:
    """A task from the user's files (read on the worker)."""
    files = TaskFiles(task, train=Path(train), test=Path(test),
                      train_keys=Path(train_keys) if train_keys else None,
                      test_keys=Path(test_keys) if test_keys else None, label=label)
    return ProbeTask(f"{task}: {Path(train).name} → {Path(test).name}", task,
                     lambda: load_task_data(files), semantic=task == "wsd")


#: the most distinct labels a pos or tsv probe learns (UPOS has 17, PTB XPOS ~50, deprel ~40;
#: a softmax over 10^5 labels took gigabytes and minutes). WSD tasks score each word's own
#: candidate senses and are not capped here.
MAX_PROBE_LABELS = 1_000


def check_label_count(sentences, path) -> None:
    """Refuse a training set with more than :data:`MAX_PROBE_LABELS` distinct labels, naming
    the file, before anything is embedded."""
    from elmo_engine.errors import InputError

    seen: Set[str] = set()
    for s in sentences:
        seen.update(lab for lab in s.labels if lab is not None)
        if len(seen) > MAX_PROBE_LABELS:
            raise InputError(f"more than {MAX_PROBE_LABELS:,} distinct labels; a probe task has "
                             "at most that many (is the label column right?)", path=path)
