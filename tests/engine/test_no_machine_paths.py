"""No tracked file names a path of a development machine (under /work, /root, /tmp, /mnt,
/home/<user>, /Users/<user>, a Windows user folder): paths in the repository are relative to
it, or to ``../shared`` beside it."""
from __future__ import annotations

import re
import subprocess

from support import REPO

MACHINE_PATH = re.compile(r"(?<![\w.~-])(/(?:work|root|tmp|mnt|opt/conda)/[\w.-]|/home/\w|/Users/\w"
                          r"|[A-Za-z]:\\Users\\)")
BINARY = (".png", ".hdf5", ".npz", ".gz", ".safetensors")


def tracked_files():
    out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True)
    return [REPO / name for name in out.stdout.decode().split("\0") if name]


def test_no_tracked_file_names_a_machine_path():
    files = tracked_files()
    assert len(files) > 100
    hits = []
    for path in files:
        if path.suffix in BINARY or not path.is_file():
            continue
        text = path.read_bytes().decode("utf-8", "replace")
        for n, line in enumerate(text.splitlines(), start=1):
            if MACHINE_PATH.search(line):
                hits.append(f"{path.relative_to(REPO)}:{n}: {line.strip()[:120]}")
    assert hits == []


def test_the_pattern_finds_machine_paths():
    def p(*parts):                     # built, so that this file holds no such path itself
        return "/" + "/".join(parts)

    for text in ("see " + p("work", "train_demo", "run"), repr(p("root", ".cache", "x")),
                 p("home", "alice", "data"), p("tmp", "x.txt"), "C:" + "\\Users\\bob",
                 p("Users", "carol", "x")):
        assert MACHINE_PATH.search(text), text
    for text in ("../shared/data", "tests/fixtures/elmo", "docs/guide/app.md", "a/work/b",
                 "https://openstax.org/books", "~/.config/ELMoExplorer", "/usr/share/wordnet"):
        assert not MACHINE_PATH.search(text), text
