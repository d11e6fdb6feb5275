"""Labelled data for the probes: CoNLL-U, WSD framework XML + keys, token/label TSV, sentence files,
WordNet 3.0 sense lookups and the built-in demo tasks. Every reader takes plain or gzip files and
raises :class:`~elmo_engine.errors.InputError` naming the file and line for bad input.

Public API::

    read_conllu(path, label="upos", limit=None)            -> Iterator[LabelledSentence]
    read_tsv(path, limit=None, unlabelled="_")            -> Iterator[LabelledSentence]
    read_wsd(xml_path, keys_path=None, wordnet=None, limit=None) -> Iterator[WsdSentence]
    read_keys(path)                                       -> dict[str, tuple[str, ...]]
    read_sentences(path, max_bytes=..., limit=None)       -> list[str]
    WordNet(path).candidates / first_sense / supersense / sense_number
    load_demo_task(task, split) / load_demo_wsd(split)
"""
from elmo_engine.io.datasets.conllu import LABEL_COLUMNS, count_conllu, read_conllu
from elmo_engine.io.datasets.demo import (
                                          DEMO_TASKS,
                                          SPLITS,
                                          DemoSense,
                                          demo_candidates,
                                          demo_first_sense,
                                          demo_senses,
                                          demo_tasks_dir,
                                          load_demo_task,
                                          load_demo_wsd,
                                          )
from elmo_engine.io.datasets.records import LabelledSentence, WsdInstance, WsdSentence
from elmo_engine.io.datasets.sentences import clean_sentence, iter_sentences, read_sentences
from elmo_engine.io.datasets.textio import is_gzip, iter_lines, open_binary, open_text
from elmo_engine.io.datasets.tsv import read_tsv, write_tsv
from elmo_engine.io.datasets.wordnet import (
                                             WordNet,
                                             candidates,
                                             default_wordnet,
                                             first_sense,
                                             load_wordnet,
                                             parse_sense_key,
                                             supersense,
                                             )
from elmo_engine.io.datasets.wsd import count_wsd, read_keys, read_wsd

__all__ = [
    "DEMO_TASKS", "LABEL_COLUMNS", "SPLITS", "DemoSense", "LabelledSentence", "WordNet",
    "WsdInstance", "WsdSentence", "candidates", "clean_sentence", "count_conllu", "count_wsd",
    "default_wordnet", "demo_candidates", "demo_first_sense", "demo_senses", "demo_tasks_dir",
    "first_sense", "is_gzip", "iter_lines", "iter_sentences", "load_demo_task", "load_demo_wsd",
    "load_wordnet", "open_binary", "open_text", "parse_sense_key", "read_conllu", "read_keys",
    "read_sentences", "read_tsv", "read_wsd", "supersense", "write_tsv",
]
