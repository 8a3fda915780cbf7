#!/usr/bin/env bash
# GPU benchmark run: `moe-core bench`, every available backend checked against the reference and
# timed against its peers and the roofline; results under $OUT (or ./out): bench JSON/CSV/PNG and log.
# It only benchmarks: the GPU tests are the README's test command, `bash scripts/test.sh` (run it
# first). Set-up is scripts/bootstrap.sh's, which reuses the GPU image's torch and triton offline
# (docs/gpu-setup.md).
# Usage (on the GPU machine, from the repository root): bash benchmarks/gpu_run.sh [bench args...]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${OUT:-$PWD/out}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1
bash "$root/scripts/bootstrap.sh" python -c 'import sys, torch, triton
print(f"python {sys.version.split()[0]} torch {torch.__version__} triton {triton.__version__}",
      f"gpu {torch.cuda.get_device_name()} cc {torch.cuda.get_device_capability()}")'
bash "$root/scripts/bootstrap.sh" moe-core bench --quiet --json "$out/bench.json" --csv "$out/bench.csv" \
  --plot "$out/bench.png" "$@" 2>&1 | tee "$out/bench.txt" | tail -120
