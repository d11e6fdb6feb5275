"""``python -m elmo_engine.lm_train CORPUS --dev DEV --out DIR …`` (also the ``torchrun`` target)."""
import sys

from elmo_engine.lm_train.cli import main

sys.exit(main())
