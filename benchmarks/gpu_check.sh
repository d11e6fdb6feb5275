#!/usr/bin/env bash
# GPU check, one short script: conformance tests on CUDA (and the word-sense probe's sparse
# candidate logits, the CUDA-graph loop's CPU-side tests), then full-model tokens/s for 256 /
# 1,024 / 4,096 sentences, eager against CUDA graphs, fp32 / bf16 / fp16, with the largest
# difference from the CPU's float32 vectors (benchmarks/bench_gpu.py).
# Run from the repo root on a machine with a CUDA GPU and the project installed (see README).
set -euo pipefail
cd "$(dirname "$0")/.."
python - <<'PY'
import torch
assert torch.cuda.is_available(), "no CUDA device: this check needs a GPU"
print("device:", torch.cuda.get_device_name(0), "| torch", torch.__version__)
PY
# The Embedder picks CUDA when it is available, so the conformance tests run on the GPU here:
# once eager, once with CUDA graphs (opt-in: ELMO_EXPLORER_CUDA_GRAPHS=1).
python -m pytest -q -p no:cacheprovider tests/engine/test_conformance.py tests/engine/test_embedder.py \
    tests/engine/test_probe_sampled.py tests/engine/test_lstm_graphs.py
ELMO_EXPLORER_CUDA_GRAPHS=1 python -m pytest -q -p no:cacheprovider tests/engine/test_conformance.py \
    tests/engine/test_embedder.py
python benchmarks/bench_gpu.py --sentences 256 1024 4096 --repeats 2
