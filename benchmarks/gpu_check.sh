#!/usr/bin/env bash
# GPU check, one short script: conformance tests on CUDA (and the word-sense probe's sparse
# candidate logits), then full-model tokens/s at batch 256.
# Run from the repo root on a machine with a CUDA GPU and the project installed (see README).
set -euo pipefail
cd "$(dirname "$0")/.."
python - <<'PY'
import torch
assert torch.cuda.is_available(), "no CUDA device: this check needs a GPU"
print("device:", torch.cuda.get_device_name(0), "| torch", torch.__version__)
PY
# The Embedder picks CUDA when it is available, so the conformance tests run on the GPU here.
python -m pytest -q -p no:cacheprovider tests/engine/test_conformance.py tests/engine/test_embedder.py \
    tests/engine/test_probe_sampled.py
python benchmarks/bench_gpu.py --batch 256
