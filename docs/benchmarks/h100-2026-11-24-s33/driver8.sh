# GPU call 8 (2026-11-25, session 33): the final code (int4 codes with and without zero points in fragment order, the
# tiles of calls 4 to 7): the weight-only and k_order GPU test files in full.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
T=plugins/triton_backend/tests
timeout 560 python3 -m pytest -q -p no:cacheprovider $T/test_triton_k_order.py $T/test_triton_weight_only.py 2>&1 | tail -6 > $OUT/gpu_tests8.txt; echo "tests $(( $(date +%s) - s )) s"; tail -3 $OUT/gpu_tests8.txt
