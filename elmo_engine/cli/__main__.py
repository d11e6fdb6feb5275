"""``python -m elmo_engine.cli COMMAND …``: the headless commands without the app's entry point
(what ``torchrun -m elmo_engine.cli index …`` runs)."""
from __future__ import annotations

import sys

from elmo_engine.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
