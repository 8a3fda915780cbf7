# GPU call 7 (2026-11-26, session 37): the final code's GPU tests of the robustness file (2000 garbage routings through
# a Qwen3 layer at 64 tokens by two GEMMs and at 1 token by the one-launch layer) and of the fused file.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
(cd plugins/triton_backend && timeout 560 python3 -m pytest -q -p no:cacheprovider -rA tests/test_robustness.py tests/test_triton_fused.py 2>&1 | grep -E "PASSED|FAILED|ERROR|passed|failed" | tail -60) > $OUT/gpu_tests7.txt
echo "tests $(( $(date +%s) - s )) s"; tail -25 $OUT/gpu_tests7.txt
