#!/usr/bin/env bash
# Issue 13's next GPU step in one device call (from the repository root of the GPU machine): the SWAP_AB
# tests compiled (tuned files may pick the transposed product), then tune the weight-only launch
# configurations for this GPU (python -m moe_core_triton.tune writes the package's configs/<device>.json and
# logs every candidate's time, swapped or not, in the same run; a copy goes to $OUT), then the weight-only
# bench with them (benchmarks/weight_only_gpu.sh, its tests skipped). PRESETS, SCHEMES and TOKENS choose what is
# tuned. The defaults fit one 10-minute device call by estimate, not by measurement: every candidate compiles once per
# scheme and GEMM (up to 56 per GEMM with SWAP_AB, about 1 s each), so tune more schemes in further calls.
set -euo pipefail
out="${OUT:-gpu-out}"
mkdir -p "$out"
presets="${PRESETS:-qwen3-30b-a3b}"
schemes="${SCHEMES:-w4a16,mxfp4}"
tokens="${TOKENS:-1,16,64,256,1024,4096}"
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend
python3 -m pytest -q -p no:cacheprovider plugins/triton_backend/tests/test_triton_swap_ab.py 2>&1 | tee "$out/swap_ab_gpu_tests.log" || true
for preset in $presets; do
  wanted="$schemes"
  [ "$preset" = gpt-oss-20b ] && wanted=mxfp4  # gpt-oss ships mxfp4 experts only
  python3 -m moe_core_triton.tune --preset "$preset" --scheme "$wanted" --tokens "$tokens" 2>&1 | tee -a "$out/tune_weight_only.log"
done
cp plugins/triton_backend/moe_core_triton/configs/*.json "$out/"
if [ "${BENCH:-1}" = 1 ]; then SKIP_TESTS=1 bash benchmarks/weight_only_gpu.sh; fi  # BENCH=0: tune only
