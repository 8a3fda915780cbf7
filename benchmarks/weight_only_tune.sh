#!/usr/bin/env bash
# Issue 13's next GPU step in one device call (from the repository root of the GPU machine): tune the
# weight-only launch configurations for this GPU (python -m moe_core_triton.tune writes the package's
# configs/<device>.json; a copy goes to $OUT), then the weight-only bench with them (benchmarks/weight_only_gpu.sh,
# its tests skipped). PRESETS and SCHEMES narrow the run to fit a device call.
set -euo pipefail
out="${OUT:-gpu-out}"
mkdir -p "$out"
presets="${PRESETS:-qwen3-30b-a3b mixtral-8x7b gpt-oss-20b}"
schemes="${SCHEMES:-w4a16,w4a16-zp,w8a16,w8a16-zp,fp8-w8a16,fp8-block-w8a16,nvfp4-w4a16,mxfp4}"
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend
for preset in $presets; do
  wanted="$schemes"
  [ "$preset" = gpt-oss-20b ] && wanted=mxfp4  # gpt-oss ships mxfp4 experts only
  python3 -m moe_core_triton.tune --preset "$preset" --scheme "$wanted" --tokens 1,16,64,256,1024,4096 2>&1 | tee -a "$out/tune_weight_only.log"
done
cp plugins/triton_backend/moe_core_triton/configs/*.json "$out/"
SKIP_TESTS=1 bash benchmarks/weight_only_gpu.sh
