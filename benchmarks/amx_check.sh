#!/usr/bin/env bash
# AMX check, one script for a CPU host with Intel AMX (amx_bf16): the three measurements that
# issue 43's "done when" asks of such a host, in order, each printing the host line and its
# GEMM ceilings. Run from the repo root with the project installed (see README), on a quiet
# machine (nothing else running: a test suite beside it slows every figure down).
#   1. embed, whole command, full size, fp32 against bf16 (ABBA), with the per-layer cosines,
#      for 256 and 1,024 held-out sentences, and where the time goes (--phases); the 1,024 again
#      at 64 rows per batch, embed's default before 2026-12-07 (its default is now 256 rows,
#      over which each step's recurrent GEMM spreads the streaming of its weight)
#   2. where bf16 spends its time and which oneDNN kernels run (amx or not, reorders per step),
#      and one LSTM step part by part: the gate arithmetic's share once the GEMMs run on tiles
#   3. train-lm's step: the baseline trainer, fused fp32 and fused bf16, in one run
#   4. the fused step with glibc's default heap against the freed blocks reused, as train-lm
#      runs it (process-wide, so in child processes): train-lm's speed is the fused rows of 3
#      times this ratio
# Takes about 21 minutes on a 2-core host; each part also runs alone (the commands below).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! grep -qw amx_bf16 /proc/cpuinfo; then
    echo "this CPU has no AMX (amx_bf16 is not among its flags): the figures would not be" \
         "the ones issue 43 asks for; run the benchmarks one by one instead" >&2
    exit 2
fi
python benchmarks/bench_embed_command.py --sentences 256 --rounds 2 --phases
python benchmarks/bench_embed_command.py --sentences 1024 --rounds 1
python benchmarks/bench_embed_command.py --sentences 1024 --rounds 1 --batch-size 64
python benchmarks/profile_bf16.py
python benchmarks/bench_gate_step.py --rows 64 256
python benchmarks/bench_train.py --steps 20 --rounds 3
python benchmarks/bench_train_malloc.py --steps 20 --rounds 4
