"""The bundled model's dev checks: do senses separate, and do the probes find syntax and sense?

Run before shipping a demo model, and on the snapshots of its training run for a learning curve
(``train-lm --eval-minutes`` writes them to ``OUT/snapshots/``). Uses the data sets in
``../shared/data`` (not shipped); prints a table and writes JSON.

- ``senses``: for ambiguous SemCor lemmas whose two most frequent senses have at least
  ``--min-per-sense`` instances each (nouns and verbs), the leave-one-out nearest-sense-centroid
  accuracy per layer (cosine; a tie counts half), averaged over lemmas. Layer 0 is context-free,
  so there it only sees inflection; chance is 0.5.
- ``upos``: the probe CLI's part-of-speech probe — EWT train (a seeded ``--pos-sentences`` of it)
  → EWT dev, per-layer accuracy against the word-majority baseline.
- ``wsd``: the probe CLI's word-sense probe — SemCor (a seeded ``--wsd-sentences`` of it) →
  SemEval-2007, per-layer F1 (linear over the lemma's senses, and the paper's nearest sense
  centroid) against WordNet's first sense.

    python scripts/dev_checks.py CHECKPOINT [--checks senses,upos,wsd] [--json OUT]
    python scripts/dev_checks.py --snapshots RUN/snapshots --json curve.json   # every snapshot
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from elmo_engine.model.checkpoint import load_checkpoint
from elmo_engine.io.datasets.conllu import read_conllu
from elmo_engine.io.datasets.wordnet import load_wordnet, supersense
from elmo_engine.io.datasets.wsd import read_wsd
from elmo_engine.embed.embedder import Embedder
from elmo_engine.analysis.probes.experiment import ProbeConfig, probe_sentences

DATA = ROOT.parent / "shared" / "data"
EWT_TRAIN = DATA / "ud_english_ewt" / "en_ewt-ud-train.conllu.gz"
EWT_DEV = DATA / "ud_english_ewt" / "en_ewt-ud-dev.conllu"
SEMCOR = DATA / "semcor30" / "semcor.data.xml.gz"
SEMCOR_KEYS = DATA / "semcor30" / "semcor.gold.key.txt.gz"
SE07 = DATA / "wsd_eval_raganato2017" / "semeval2007" / "semeval2007.data.xml"
SE07_KEYS = DATA / "wsd_eval_raganato2017" / "semeval2007" / "semeval2007.gold.key.txt"


def sense_items(min_per_sense: int, per_sense: int, max_lemmas: int, seed: int = 0):
    """(lemma#pos, sense, tokens, start, stop) of the two most frequent senses of ambiguous
    SemCor nouns and verbs: at most ``per_sense`` instances of each sense, the lemmas with the
    most instances of their second sense first, ``max_lemmas`` per part of speech."""
    found = defaultdict(list)
    for sent in read_wsd(SEMCOR, SEMCOR_KEYS):
        for inst in sent.instances:
            if inst.pos in ("NOUN", "VERB") and inst.keys:
                found[f"{inst.lemma}#{inst.pos}"].append((inst.keys[0], sent.tokens, inst.start,
                                                          inst.stop))
    rng = random.Random(seed)
    chosen = {"NOUN": [], "VERB": []}
    for lemma, items in found.items():
        top = Counter(k for k, *_ in items).most_common(2)
        if len(top) == 2 and top[1][1] >= min_per_sense:
            chosen[lemma.rsplit("#", 1)[1]].append((top[1][1], lemma, [k for k, _ in top]))
    out = []
    for pos, lemmas in chosen.items():
        for _, lemma, senses in sorted(lemmas, reverse=True)[:max_lemmas]:
            # "coarse": the two senses sit in different lexicographer files (bank: noun.object
            # and noun.group), as homonyms do, rather than being close WordNet distinctions
            coarse = supersense(senses[0]) != supersense(senses[1])
            for sense in senses:
                inst = [it for it in found[lemma] if it[0] == sense]
                rng.shuffle(inst)
                out.extend((lemma, sense, toks, a, b, coarse) for _, toks, a, b in inst[:per_sense])
    return out


def loo_centroid_accuracy(x: np.ndarray, labels: np.ndarray) -> float:
    """Leave-one-out nearest-centroid accuracy (cosine) over ``x`` (n, d); ties count half."""
    x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    classes = np.unique(labels)
    sums = {c: x[labels == c].sum(0) for c in classes}
    counts = {c: int((labels == c).sum()) for c in classes}
    score = 0.0
    for i in range(len(x)):
        sims = []
        for c in classes:
            s, n = sums[c], counts[c]
            if labels[i] == c:
                s, n = s - x[i], n - 1
            cen = s / max(n, 1)
            sims.append(float(x[i] @ cen) / max(float(np.linalg.norm(cen)), 1e-12))
        sims = np.array(sims)
        best = np.flatnonzero(np.isclose(sims, sims.max(), rtol=0, atol=1e-5))
        if labels[i] in classes[best]:
            score += 1.0 / len(best)
    return score / len(x)


def check_senses(embedder, items) -> dict:
    by_lemma = defaultdict(list)
    for it in items:
        by_lemma[it[0]].append(it)
    sents = [list(it[2]) for it in items]
    arrays = []
    for start in range(0, len(sents), 256):
        arrays.extend(embedder.embed(sents[start:start + 256]))
    vec = {id(it): arr[:, it[3]:it[4]].mean(1) for it, arr in zip(items, arrays)}  # (K, D)
    k = arrays[0].shape[0]
    groups = ("NOUN", "VERB", "NOUN coarse", "VERB coarse")
    res = {g: [[] for _ in range(k)] for g in groups}
    for lemma, its in by_lemma.items():
        labels = np.array([it[1] for it in its])
        x = np.stack([vec[id(it)] for it in its])                                    # (n, K, D)
        pos = lemma.rsplit("#", 1)[1]
        for layer in range(k):
            acc = loo_centroid_accuracy(x[:, layer], labels)
            res[pos][layer].append(acc)
            if its[0][5]:
                res[pos + " coarse"][layer].append(acc)
    out = {g: [round(float(np.mean(v)), 4) if v else None for v in per] for g, per in res.items()}
    out["all"] = [round(float(np.mean(res["NOUN"][h] + res["VERB"][h])), 4) for h in range(k)]
    out["lemmas"] = {g: len(res[g][0]) for g in groups}
    out["instances"] = len(items)
    return out


def check_demo_sentences(embedder) -> dict:
    """Leave-one-out nearest-sense-centroid accuracy per layer over the grouped demo sentences
    (``resources/demo_sentences.tsv``: bank river/money, play theatre/game/instrument …), per
    word and pooled over the words' occurrences."""
    from elmo_engine.model.tokenize import tokenize

    rows = [ln.split("\t", 1) for ln in
            (ROOT / "resources" / "demo_sentences.tsv").read_text("utf-8").splitlines()
            if ln.strip() and not ln.startswith("#")]
    by_word = defaultdict(list)
    for group, text in rows:
        word = group.split(":")[0].strip()
        toks = tokenize(text)
        idx = next(i for i, t in enumerate(toks) if t.lower() == word)
        by_word[word].append((group, toks, idx))
    out, hits = {}, None
    for word, items in by_word.items():
        arrays = embedder.embed([t for _, t, _ in items])
        x = np.stack([a[:, i] for a, (_, _, i) in zip(arrays, items)])             # (n, K, D)
        labels = np.array([g for g, _, _ in items])
        accs = [loo_centroid_accuracy(x[:, k], labels) for k in range(x.shape[1])]
        out[word] = [round(a, 4) for a in accs]
        w = np.array(accs) * len(items)
        hits = w if hits is None else hits + w
    out["pooled"] = [round(float(v) / len(rows), 4) for v in hits]
    return out


def check_probe(embedder, task: str, n_sentences: int, seed: int = 0) -> dict:
    cfg = ProbeConfig(seed=seed).for_task(task)            # the probe command's defaults
    if task == "pos":
        train = list(read_conllu(EWT_TRAIN, label="upos"))
        test = list(read_conllu(EWT_DEV, label="upos"))
        fs = None
    else:
        wn = load_wordnet()
        train = list(read_wsd(SEMCOR, SEMCOR_KEYS, wordnet=wn))
        test = list(read_wsd(SE07, SE07_KEYS, wordnet=wn))
        fs = wn.first_sense
    res = probe_sentences(embedder, train, test, None, task=task, config=cfg,
                          max_train_sentences=n_sentences, first_sense_fn=fs)
    d = res.to_dict()
    out = {"layers": [round(e["test"], 4) for e in d["layers"]],
           "mix": round(d["mix"]["test"], 4), "mix_weights": [round(w, 3) for w in d["mix"]["weights"]],
           "baselines": {k: round(v, 4) for k, v in d["baselines"].items()},
           "wall_time_s": round(d["wall_time_s"], 1), "train_sentences": n_sentences}
    if task == "wsd":
        out["centroid"] = [round(e["centroid_test"], 4) for e in d["layers"]]
    return out


def run_checks(checkpoint: Path, checks, args, items=None) -> dict:
    model = load_checkpoint(checkpoint)
    embedder = Embedder(model, device="cpu", cache_size=512)
    out = {"checkpoint": str(checkpoint)}
    t0 = time.perf_counter()
    if "senses" in checks:
        out["senses"] = check_senses(embedder, items)
    if "demo" in checks:
        out["demo_sentences"] = check_demo_sentences(embedder)
    if "upos" in checks:
        out["upos"] = check_probe(embedder, "pos", args.pos_sentences)
    if "wsd" in checks:
        out["wsd"] = check_probe(embedder, "wsd", args.wsd_sentences)
    out["wall_time_s"] = round(time.perf_counter() - t0, 1)
    training = checkpoint / "training.json"
    if training.is_file():
        meta = json.loads(training.read_text())
        out.update({k: meta.get(k) for k in ("step", "steps", "tokens", "train_seconds")
                    if meta.get(k) is not None})
        out["dev_perplexity"] = (meta.get("dev_perplexity") or {}).get("mean")
    return out


def show(res: dict) -> str:
    lines = [str(res["checkpoint"])]
    if "senses" in res:
        s = res["senses"]
        n = s["lemmas"]
        lines.append(f"  senses, LOO centroid: {n['NOUN']} nouns {s['NOUN']}, {n['VERB']} verbs "
                     f"{s['VERB']}; coarse: {n['NOUN coarse']} nouns {s['NOUN coarse']}, "
                     f"{n['VERB coarse']} verbs {s['VERB coarse']}")
    if "demo_sentences" in res:
        lines.append(f"  demo sentences, LOO centroid per word: {res['demo_sentences']}")
    if "upos" in res:
        u = res["upos"]
        lines.append(f"  UPOS: layers {u['layers']} mix {u['mix']} weights {u['mix_weights']} "
                     f"baselines {u['baselines']}")
    if "wsd" in res:
        w = res["wsd"]
        lines.append(f"  WSD F1: linear {w['layers']} centroid {w['centroid']} mix {w['mix']} "
                     f"weights {w['mix_weights']} baselines {w['baselines']}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint", type=Path, nargs="?")
    ap.add_argument("--snapshots", type=Path, help="run the checks on every snapshot folder")
    ap.add_argument("--checks", default="demo,senses,upos,wsd")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--min-per-sense", type=int, default=20)
    ap.add_argument("--per-sense", type=int, default=25)
    ap.add_argument("--max-lemmas", type=int, default=60, help="per part of speech")
    ap.add_argument("--pos-sentences", type=int, default=4000)
    ap.add_argument("--wsd-sentences", type=int, default=8000)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    checks = set(args.checks.split(","))
    items = sense_items(args.min_per_sense, args.per_sense, args.max_lemmas) \
        if "senses" in checks else None
    folders = sorted(p for p in args.snapshots.iterdir() if p.is_dir()) if args.snapshots \
        else [args.checkpoint]
    results = []
    for folder in folders:
        res = run_checks(folder, checks, args, items)
        print(show(res), flush=True)
        results.append(res)
    if args.json:
        args.json.write_text(json.dumps(results if args.snapshots else results[0], indent=1) + "\n")


if __name__ == "__main__":
    main()
