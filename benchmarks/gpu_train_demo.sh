#!/usr/bin/env bash
# A wider demo model (preset demo-wide: LSTM 1024 -> 256) trained on one GPU for MINUTES of
# training steps on the demo's two corpora, then its dev perplexity; the result is kept in place
# of the bundled model only if it beats it on scripts/dev_checks.py (docs/guide/training.md).
#
#   bash benchmarks/gpu_train_demo.sh [MINUTES=6] [OUT=runs/demo-wide] [PRECISION=fp32]
#
# Run from the repo root on a machine with a CUDA GPU, the project installed and ../shared/data.
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES=${1:-6}; OUT=${2:-runs/demo-wide}; PRECISION=${3:-fp32}
DATA=../shared/data
python -m elmo_engine.cli train-lm "$DATA/openstax_prose/train.txt.gz" "$DATA/pd_fiction/train.txt.gz" \
    --dev "$DATA/openstax_prose/valid.txt" "$DATA/pd_fiction/valid.txt" --out "$OUT" \
    --preset demo-wide --device cuda --precision "$PRECISION" --max-minutes "$MINUTES" \
    --cooldown-minutes 1.5 --log-every 200 --no-progress
