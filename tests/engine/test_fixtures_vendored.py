"""The vendored test checkpoints are the published files, byte for byte (tests/fixtures/elmo/)."""
from __future__ import annotations

import hashlib
import re

from support import FIXTURES


def test_fixtures_match_their_recorded_checksums():
    note = (FIXTURES / "SOURCE.md").read_text(encoding="utf-8")
    recorded = dict((path, digest) for digest, path in
                    re.findall(r"^([0-9a-f]{64})  (\S+)$", note, flags=re.MULTILINE))
    files = {p.relative_to(FIXTURES).as_posix() for p in FIXTURES.rglob("*")
             if p.is_file() and p.name not in ("SOURCE.md", "LICENSE")}
    assert set(recorded) == files and len(files) == 15
    for path, digest in recorded.items():
        assert hashlib.sha256((FIXTURES / path).read_bytes()).hexdigest() == digest, path
    assert "Apache License" in (FIXTURES / "LICENSE").read_text(encoding="utf-8")
