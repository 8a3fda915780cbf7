# GPU call 5 (2026-11-25, session 34): the final code (the heuristic swaps only tiles of codes in fragment order) on the
# GPU: the weight-only, k_order, tune and configs test files, compiled in bfloat16 and float16.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
cd plugins/triton_backend
timeout 560 python3 -m pytest -q -p no:cacheprovider tests/test_triton_k_order.py tests/test_triton_configs.py tests/test_triton_tune.py \
  tests/test_triton_weight_only.py > $OUT/gpu_tests5.txt 2>&1; echo "tests rc=$? $(( $(date +%s) - s )) s"
tail -5 $OUT/gpu_tests5.txt
