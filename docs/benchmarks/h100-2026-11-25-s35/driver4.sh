# GPU call 4 (2026-11-25, session 35): the final code on the GPU: the weight-only, k_order, tune and configs test files,
# compiled in bfloat16 and float16, then the replay file's w8a16 cases.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
cd plugins/triton_backend
timeout 480 python3 -m pytest -q -p no:cacheprovider tests/test_triton_k_order.py tests/test_triton_configs.py tests/test_triton_tune.py \
  tests/test_triton_weight_only.py > $OUT/gpu_tests4.txt 2>&1; echo "tests rc=$? $(( $(date +%s) - s )) s"
timeout $(( 585 - ($(date +%s) - s) )) python3 -m pytest -q -p no:cacheprovider tests/test_triton_replay.py -k "w8a16" >> $OUT/gpu_tests4.txt 2>&1
echo "replay rc=$? $(( $(date +%s) - s )) s"
grep -E "passed|failed|Error|FAIL" $OUT/gpu_tests4.txt | tail -15
