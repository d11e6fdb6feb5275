"""``python -m elmo_engine.train CORPUS --dev DEV --out DIR …`` (also the ``torchrun`` target)."""
import sys

from elmo_engine.cli.train_lm import main

sys.exit(main())
