#!/usr/bin/env bash
# The weight-only schemes' GPU evidence in one 10-minute GPU run (run from the repository root on the GPU machine):
# the weight-only GPU tests (bf16 and fp16, K = 7168, CUDA-graph capture, batched format) and those of the
# launch options tuned files may pick (SWAP_AB, SPLIT_K), then every
# weight-only scheme against bf16 Triton in the same bench run, with each format's real bytes
# (codes + scales + zero points) in the roofline. Results go to $OUT (default gpu-out/). SKIP_TESTS=1: the bench only.
set -euo pipefail
out="${OUT:-gpu-out}"
mkdir -p "$out"
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend
if [ -z "${SKIP_TESTS:-}" ]; then  # the bench runs even if a test fails
  python3 -m pytest -q -p no:cacheprovider plugins/triton_backend/tests/test_triton_weight_only.py \
    plugins/triton_backend/tests/test_triton_split_k.py plugins/triton_backend/tests/test_triton_swap_ab.py 2>&1 | tee "$out/weight_only_gpu_tests.log" || true
fi
schemes="unquantized,w4a16,w4a16-zp,w8a16,w8a16-zp,fp8-w8a16,fp8-block-w8a16,nvfp4-w4a16,mxfp4"
for preset in mixtral-8x7b qwen3-30b-a3b; do
  moe-core bench --quiet --backends triton --peers '' --preset "$preset" --scheme "$schemes" --tokens 1,16,64,256,1024,4096 \
    --reference-max-tokens 256 --json "$out/bench_weight_only_$preset.json" | tee "$out/bench_weight_only_$preset.txt"
done
moe-core bench --quiet --backends triton --peers '' --preset gpt-oss-20b --scheme unquantized,mxfp4 --tokens 1,16,64,256,1024,4096 \
  --reference-max-tokens 256 --json "$out/bench_weight_only_gpt-oss-20b.json" | tee "$out/bench_weight_only_gpt-oss-20b.txt"
