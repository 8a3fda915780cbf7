#!/usr/bin/env bash
# Issue 13's next GPU step in one device call (from the repository root of the GPU machine): the SWAP_AB
# tests compiled (tuned files may pick the transposed product), then tune the weight-only launch
# configurations for this GPU (python -m moe_core_triton.tune writes the package's configs/<device>.json and
# logs every candidate's time, swapped or not, in the same run; a copy goes to $OUT), then the weight-only
# bench with them (benchmarks/weight_only_gpu.sh, its tests skipped). PRESETS and SCHEMES narrow the run.
set -euo pipefail
out="${OUT:-gpu-out}"
mkdir -p "$out"
presets="${PRESETS:-qwen3-30b-a3b mixtral-8x7b gpt-oss-20b}"
schemes="${SCHEMES:-w4a16,w4a16-zp,w8a16,w8a16-zp,fp8-w8a16,fp8-block-w8a16,nvfp4-w4a16,mxfp4}"
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend
python3 -m pytest -q -p no:cacheprovider plugins/triton_backend/tests/test_triton_swap_ab.py 2>&1 | tee "$out/swap_ab_gpu_tests.log" || true
for preset in $presets; do
  wanted="$schemes"
  [ "$preset" = gpt-oss-20b ] && wanted=mxfp4  # gpt-oss ships mxfp4 experts only
  python3 -m moe_core_triton.tune --preset "$preset" --scheme "$wanted" --tokens 1,16,64,256,1024,4096 2>&1 | tee -a "$out/tune_weight_only.log"
done
cp plugins/triton_backend/moe_core_triton/configs/*.json "$out/"
SKIP_TESTS=1 bash benchmarks/weight_only_gpu.sh
