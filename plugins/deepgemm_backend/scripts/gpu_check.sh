#!/usr/bin/env bash
# One GPU run for the DeepGEMM plugin: build DeepGEMM (unless it imports), install the project,
# run the GPU tests, then the benchmark. Logs go to ./gpu-out, re-packed into $OUT/logs.tgz after
# every step when $OUT is set (the device tool returns at most 8 files). Run from the repo root:
#   plugins/deepgemm_backend/scripts/gpu_check.sh .deepgemm/DeepGEMM
# Each step has its own time limit so that a slow JIT compile cannot swallow the logs of the others.
set -u
src=${1:?usage: gpu_check.sh DEEPGEMM_SOURCE_DIR}
out=gpu-out
mkdir -p "$out"
export PYTHONUNBUFFERED=1
export DG_JIT_CACHE_DIR=${DG_JIT_CACHE_DIR:-$PWD/.dgcache}  # kept between calls on a warm machine
step() { local limit=$1 name=$2; shift 2; echo "== $name (limit ${limit}s)"; local t0=$SECONDS
         timeout "$limit" "$@" > "$out/$name.log" 2>&1; echo "   rc=$? in $((SECONDS - t0))s"; tail -n 4 "$out/$name.log"
         if [[ -n ${OUT:-} ]]; then tar czf "$OUT/logs.tgz" -C "$out" .; fi; }

step 240 build plugins/deepgemm_backend/build_deepgemm.sh "$src"
step 120 install python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend -e plugins/deepgemm_backend
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import sys, torch, triton, deep_gemm; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__, 'deep_gemm', deep_gemm.__version__)"
  nvcc --version | tail -1; } > "$out/env.txt" 2>&1; cat "$out/env.txt"
step 30 doctor moe-core doctor
# -n 1: one xdist worker, so that a crash inside DeepGEMM fails one test instead of the whole pytest run
step ${TEST_LIMIT:-140} gpu_tests python3 -m pytest -v -rA -n 1 plugins/deepgemm_backend/tests/test_deepgemm_gpu.py
for preset in ${PRESETS:-deepseek-v3 qwen3-30b-a3b}; do
    step ${BENCH_LIMIT:-110} "bench_$preset" moe-core bench --preset $preset --scheme fp8-block --backends deepgemm,triton \
        --tokens 1,64,4096,16384 --peers '' --json "$out/bench_$preset.json" --write-ranking "$out/ranking_$preset.json"
done
cat "$out"/bench_*.log | grep -v '^\s*$' | tail -n 40
