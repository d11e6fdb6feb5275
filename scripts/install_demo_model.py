"""Install a trained biLM as the bundled demo model and write its README from the run's record.

Run from the repository root after ``elmo-explorer train-lm … --out RUN`` has finished (or after a
snapshot was chosen)::

    python scripts/install_demo_model.py RUN [--checks CHECKS.json] [--wall-minutes N]

It copies ``options.json``, ``lm_weights.hdf5``, ``vocab.txt``, ``softmax.safetensors`` and
``training.json`` from RUN into ``resources/demo_model/`` (each file written to a temporary name
first, then renamed), copies the two corpus licences, writes ``ATTRIBUTION.txt`` (shown by
Help → About) and ``README.md`` (architecture, corpora, command, tokens, epochs, time, dev
perplexity per corpus, the learning curve, and — with ``--checks`` — the dev checks of
``scripts/dev_checks.py --json``), then re-records ``tests/engine/data/demo_model_expected.npz``.
"""
from __future__ import annotations

import argparse
import json
import os
import runpy
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEST = REPO / "resources" / "demo_model"
SHARED = REPO.parent / "shared" / "data"
FILES = ("options.json", "lm_weights.hdf5", "vocab.txt", "softmax.safetensors", "training.json")

OPENSTAX = (
    "Contains text adapted from OpenStax textbooks (U.S. History; American Government 4e; "
    "Introduction to Sociology 3e; Psychology 2e; Introduction to Political Science; World History "
    "Volumes 1 and 2; Principles of Economics 3e; Introduction to Anthropology; Biology 2e; "
    "Microbiology; Anatomy and Physiology 2e; Astronomy 2e; Chemistry 2e; Chemistry: Atoms First 2e; "
    "Physics; College Physics 2e; College Physics for AP Courses 2e; University Physics Volumes 1–3; "
    "Introduction to Business 2e; Principles of Management; Organizational Behavior; Principles of "
    "Marketing; Entrepreneurship; Business Ethics; Principles of Finance; Introduction to "
    "Intellectual Property; Workplace Software and Skills; Introduction to Philosophy; Writing Guide "
    "with Handbook; College Success; College Success Concise; Preparing for College Success; "
    "Nutrition for Nurses; Pharmacology for Nurses; Population Health for Nurses; Contemporary "
    "Mathematics; Life, Liberty, and the Pursuit of Happiness), © Rice University, "
    "https://openstax.org, licensed under CC BY 4.0; and from Concepts of Biology (a cnx.org "
    "derived copy by Robert Bear and Eve McCulloch, CC BY 4.0). Changes: prose paragraphs "
    "extracted; figures, tables, exercises, math and references removed.")
FICTION = (
    "Also trained on 60 novels and story collections first published 1813–1925, in the US public "
    "domain, as produced by Standard Ebooks (https://standardebooks.org), whose own work is "
    "dedicated to the public domain under CC0 1.0. (A few of these authors died less than 70 years "
    "ago; outside the US their books may still be under copyright.)")


def copy_atomic(src: Path, dst: Path) -> None:
    fd, tmp = tempfile.mkstemp(dir=dst.parent, prefix=f".{dst.name}.", suffix=".tmp")
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, dst)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_atomic(dst: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=dst.parent, prefix=f".{dst.name}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, dst)


def _ppl_row(label: str, entry: dict, whole_note: bool = False) -> str:
    sets = entry.get("sets", {})
    if whole_note and "eval_tokens" not in entry:
        label += ", whole files"
    cells = [f"{sets[k]['mean']:.1f}" if k in sets else "—"
             for k in ("openstax_prose/valid.txt", "pd_fiction/valid.txt")]
    return f"| {label} | {cells[0]} | {cells[1]} | {entry['mean']:.1f} |"


def _fmt(values, digits: int = 3) -> str:
    return " / ".join(f"{v:.{digits}f}" for v in values)


def _checks_table(checks: list) -> list:
    """The dev checks of every snapshot (``scripts/dev_checks.py --snapshots … --json``), one row
    per snapshot: layers 0 / 1 / 2 for each check, with the baselines."""
    out = ["| step | dev ppl | demo sentences | SemCor nouns | SemCor verbs | UPOS (majority) "
           "| WSD F1 (first sense) |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in checks:
        step = f"{r['step']:,}" if "step" in r else f"{r['steps']:,} (shipped; ppl on whole files)"
        ppl = f"{r['dev_perplexity']:.1f}" if r.get("dev_perplexity") else "—"
        demo = _fmt(r["demo_sentences"]["pooled"], 2) if "demo_sentences" in r else "—"
        nouns = _fmt(r["senses"]["NOUN"]) if "senses" in r else "—"
        verbs = _fmt(r["senses"]["VERB"]) if "senses" in r else "—"
        upos = (f"{_fmt(r['upos']['layers'])} ({r['upos']['baselines'].get('word_majority', 0):.3f})"
                if "upos" in r else "—")
        wsd = (f"{_fmt(r['wsd']['layers'])} ({r['wsd']['baselines'].get('first_sense', 0):.3f})"
               if "wsd" in r else "—")
        out.append(f"| {step} | {ppl} | {demo} | {nouns} | {verbs} | {upos} | {wsd} |")
    return out


def readme(meta: dict, checks: list | None, wall_minutes: float | None, sizes: dict,
           note: str | None = None) -> str:
    cfg, opts = meta["config"], meta["config"]["options"]
    cnn, lstm = opts["char_cnn"], opts["lstm"]
    data, dev = meta["data"], meta["dev_perplexity"]
    hist = meta.get("history", {}).get("dev", [])
    lines = [
        "# ELMo Explorer demo biLM", "",
        "A small character-input ELMo biLM bundled with ELMo Explorer so that the app works on first",
        "launch without a download. It is a teaching model, far weaker than the published ELMo models:",
        "use it to see the phenomena (a context-free layer 0, contextual layers 1–2), not for",
        "downstream tasks.", "",
        "Files: `options.json` + `lm_weights.hdf5` (the published bilm-tf/AllenNLP layout; any ELMo",
        "tool loads them), `vocab.txt` (the softmax vocabulary), `softmax.safetensors` (the softmax,",
        "weights in float16, for `elmo-explorer eval-lm`), `training.json` (command, configuration,",
        "loss and dev curves), `ATTRIBUTION.txt`, `LICENSE-CC-BY-4.0.txt`, `LICENSE-CC0-pd_fiction.txt`.",
        "", "## Architecture", "",
        f"char-CNN filters {cnn['filters']} (character embedding {cnn['embedding']['dim']}, "
        f"{cnn['n_highway']} highway layer{'s' if cnn['n_highway'] != 1 else ''}), "
        f"2 biLSTM layers with {lstm['dim']} cells and projection {lstm['projection_dim']}, "
        f"cell/projection clip {lstm['cell_clip']:g}, skip connections: three output layers of width "
        f"{2 * lstm['projection_dim']}. Weights {sizes['lm_weights.hdf5'] / 1e6:.1f} MB, softmax "
        f"{sizes['softmax.safetensors'] / 1e6:.1f} MB.",
        "", "## Training", "",
        f"Corpora, mixed by document: `openstax_prose` (31 OpenStax textbooks, CC BY 4.0) and "
        f"`pd_fiction` (60 public-domain novels), {data['train_tokens']:,} training tokens in "
        f"{data['train_sentences']:,} sentences after tokenization and sentence splitting; vocabulary "
        f"{data['vocab_size']:,} words ({100 * data['vocab_coverage']:.1f} % of training tokens).",
        "", "Command (from the repository root, 2 threads, on the 2-core development machine):", "",
        f"    {meta['command']}", ""]
    if meta.get("resumed_with"):
        lines += ["resumed with", ""] + [f"    {c}" for c in meta["resumed_with"]] + [""]
    wall = f" ({wall_minutes:.0f} minutes of wall time)" if wall_minutes else ""
    lines += [
        f"It stopped on `{meta['stopped']}` after {meta['steps']:,} steps: {meta['tokens']:,} tokens "
        f"per direction, {meta['epochs_done']:.2f} epochs, {meta['train_seconds'] / 60:.0f} minutes of "
        f"training{wall}. Batch {cfg['batch_size']} × {cfg['unroll']}-token windows with the LSTM "
        f"state carried across windows, sampled softmax with {cfg['n_negative']} shared negatives, "
        f"{cfg['optimizer'].capitalize()} (lr {cfg['lr']:g}), gradient-norm clip {cfg['clip_norm']:g}, "
        f"dropout {cfg['dropout']:g}, seed {cfg['seed']}." + (f" {note}" if note else ""), "",
        "Dev perplexity (mean of forward and backward, full softmax, words outside the vocabulary",
        "count as `<UNK>`). The curve uses the first "
        f"{cfg.get('eval_tokens') or 'all'} tokens of each valid file; the final row, whole files:", "",
        "| step (epoch) | openstax_prose | pd_fiction | mean |", "| --- | --- | --- | --- |"]
    lines += [_ppl_row(f"{e['step']:,} ({e['epoch']:.2f})", e, True) for e in hist]
    lines += [_ppl_row(f"final, {dev['tokens']:,} tokens", dev)]
    if checks:
        lines += ["", "## Dev checks over the run", "",
                  "Layers 0 / 1 / 2, from `python scripts/dev_checks.py --snapshots RUN/snapshots --json",
                  "CHECKS.json` (see its docstring): leave-one-out nearest-sense-centroid accuracy on the",
                  "grouped demo sentences and on SemCor nouns and verbs (two most frequent senses, chance",
                  "0.5); UPOS probe, 4,000 EWT sentences → EWT dev (word-majority baseline); WSD probe,",
                  "SemCor subset → SemEval-2007 (WordNet first-sense baseline).", ""]
        lines += _checks_table(checks)
        if any("wsd" not in r for r in checks):
            lines += ["", "— : not run on that snapshot (`--checks demo,senses,upos`)."]
    lines += ["", "## Attribution", "", OPENSTAX, "", FICTION, "",
              "Licences: `LICENSE-CC-BY-4.0.txt` (OpenStax), `LICENSE-CC0-pd_fiction.txt` (Standard "
              "Ebooks).", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("run", type=Path, help="a train-lm output folder (or one of its snapshots)")
    p.add_argument("--checks", type=Path, help="JSON written by scripts/dev_checks.py --json")
    p.add_argument("--wall-minutes", type=float, help="wall time of the whole run, for the README")
    p.add_argument("--note", help="a sentence on how the run ended, for the README")
    args = p.parse_args(argv)
    missing = [n for n in FILES if not (args.run / n).is_file()]
    if missing:
        print(f"install_demo_model: {args.run} lacks {', '.join(missing)}", file=sys.stderr)
        return 1
    meta = json.loads((args.run / "training.json").read_text("utf-8"))
    if "command" not in meta:
        print(f"install_demo_model: {args.run / 'training.json'} is a snapshot record; export the "
              "run first (train-lm … --resume with the spent --max-minutes)", file=sys.stderr)
        return 1
    checks = json.loads(args.checks.read_text("utf-8")) if args.checks else None
    DEST.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        copy_atomic(args.run / name, DEST / name)
    copy_atomic(SHARED / "openstax_prose" / "LICENSE-CC-BY-4.0.txt", DEST / "LICENSE-CC-BY-4.0.txt")
    copy_atomic(SHARED / "pd_fiction" / "LICENSE.txt", DEST / "LICENSE-CC0-pd_fiction.txt")
    write_atomic(DEST / "ATTRIBUTION.txt", OPENSTAX + "\n\n" + FICTION + "\n")
    sizes = {n: (DEST / n).stat().st_size for n in FILES}
    write_atomic(DEST / "README.md", readme(meta, checks, args.wall_minutes, sizes, args.note))
    runpy.run_path(str(REPO / "tests" / "engine" / "data" / "make_demo_expected.py"),
                   run_name="__main__")
    print(f"installed {args.run} into {DEST.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
