#!/usr/bin/env bash
# Tune the Triton plugin's launch configurations on this GPU, one job per argument "preset:schemes:tokens",
# e.g.  bash benchmarks/tune_gpu.sh qwen3-30b-a3b:w4a16,mxfp4:1,16,64,256,1024,4096 gpt-oss-20b:mxfp4:1,16,64
# (run from the repository root; results in $OUT, default gpu-out/). The tuned file is $OUT/<device>.json: it
# starts as the package's configs/<device>.json, or continues a copy left in $OUT by an earlier run that was
# stopped (the tuner rewrites it atomically after every case), and is copied back into the package after every
# job, so a benchmark run next uses it. Every candidate's time, swapped or not, is logged in $OUT/tune.log.
# TUNE_ARGS passes options to every tuner call, e.g. TUNE_ARGS=--refine (only the current choices' neighbours) or
# TUNE_ARGS="--jobs $(nproc)" (compile every case's candidates in that many processes first: tune.compile_ahead).
set -euo pipefail
out="${OUT:-gpu-out}"
mkdir -p "$out"
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend
packaged=$(python3 -c "import torch; from moe_core_triton import configs; print(configs.CONFIG_DIR / configs.device_file_name(torch.cuda.get_device_name()))")
tuned="$out/$(basename "$packaged")"
if [ -f "$tuned" ]; then cp "$tuned" "$packaged"; elif [ -f "$packaged" ]; then cp "$packaged" "$tuned"; fi
for job in "$@"; do
  IFS=: read -r preset schemes tokens <<<"$job"
  python3 -m moe_core_triton.tune --preset "$preset" --scheme "$schemes" --tokens "$tokens" --out "$tuned" ${TUNE_ARGS:-} 2>&1 | tee -a "$out/tune.log"
  cp "$tuned" "$packaged"
done
