# GPU call 9 (2026-11-24, session 32): weight-only scales and zero points stored with N contiguous (kernel.columns_adjacent):
# the weight-only GPU tests that read grouped scales and zero points, then an A/B in one process against HEAD 41e9b4b
# (.scratch/s32_head) on Mixtral-8x7B for every grouped weight-only scheme.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
T=plugins/triton_backend/tests
timeout 120 python3 -m pytest -q -p no:cacheprovider $T/test_triton_weight_only.py -k "odd or groups or zero or graph or batched or scales" 2>&1 | tail -4 > $OUT/gpu_tests9.txt; echo "tests $(( $(date +%s) - s )) s"; tail -2 $OUT/gpu_tests9.txt
PYTHONPATH=$PWD/.scratch/s32_head timeout $(( 560 - ($(date +%s) - s) )) python3 docs/benchmarks/h100-2026-11-24-s32/fp4_ab.py mixtral-8x7b > $OUT/layout_ab.txt 2>&1; echo "ab rc=$? $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/layout_ab.txt | tail -30
