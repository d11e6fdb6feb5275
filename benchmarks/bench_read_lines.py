"""Reading a sentence file for ``embed`` (issue 18): one-word lines, 100k and 300k of them.

``read_token_lines`` (the one sentence reader: streamed, cleaned, checked) against a plain
baseline in the same run (``[line.split() for line in open(path)]``); the ratio is what counts.
Before issue 18 the reader counted the file's newlines once per line (quadratic): 16 s for
100k lines, over 60 s for 300k.

    python benchmarks/bench_read_lines.py [N ...]
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from elmo_engine.io.datasets.sentences import read_token_lines


def _time(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main(sizes) -> None:
    import hostinfo                 # the host: CPU, flags, bf16 units, torch capability
    print(hostinfo.host_line())
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            path = Path(tmp) / f"lines{n}.txt"
            path.write_text("".join(f"word{i}\n" for i in range(n)), encoding="utf-8")
            base = _time(lambda: [ln.split() for ln in open(path, encoding="utf-8")])
            ours = _time(lambda: read_token_lines(path))
            print(f"{n:>8} lines  read_token_lines {ours:7.3f} s  baseline {base:6.3f} s  "
                  f"ratio {ours / base:6.1f}")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [100_000, 300_000])
