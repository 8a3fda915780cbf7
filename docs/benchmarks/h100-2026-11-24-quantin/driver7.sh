# GPU call 7 of 2026-11-24: the plugin's GPU test files that had not run on the GPU at this session's code.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
T=plugins/triton_backend/tests
timeout 540 python3 -m pytest -q -p no:cacheprovider $T/test_triton_split_k.py $T/test_triton_swap_ab.py $T/test_triton_tma.py $T/test_plugin.py $T/test_kernels.py -k "not capturable and not pair and not matches_reference and not edge" 2>&1 | tee $OUT/gpu_tests7.txt | tail -8; echo "tests $(( $(date +%s) - s )) s"
