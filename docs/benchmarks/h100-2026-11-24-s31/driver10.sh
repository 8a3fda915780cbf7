# GPU call 10 (2026-11-24, session 31), the final code: W_PTX is now set only for packed int4 codes with zero points
# (w8a16-zp no longer carries the unused flag): the weight-only tests of the zero-point schemes and the PTX rule.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
T=plugins/triton_backend/tests
timeout 400 python3 -m pytest -q -p no:cacheprovider $T/test_triton_weight_only.py -k "zp or ptx or int4" 2>&1 | tail -4 > $OUT/gpu_tests10.txt; echo "tests $(( $(date +%s) - s )) s"; tail -2 $OUT/gpu_tests10.txt
