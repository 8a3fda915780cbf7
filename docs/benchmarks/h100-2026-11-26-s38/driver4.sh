# GPU call 4 (2026-11-26, session 38): the sorted intermediate against the layout by pair (sorted_ab.py), then the
# GPU tests of the files it touches.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
timeout 330 python3 docs/benchmarks/h100-2026-11-26-s38/sorted_ab.py 2>&1 | grep -v -i warn > $OUT/sorted_ab4.txt; echo "ab rc=$? $(( $(date +%s) - s )) s"; cat $OUT/sorted_ab4.txt
timeout $(( s + 580 - $(date +%s) )) python3 -m pytest -q -x -p no:cacheprovider plugins/triton_backend/tests/test_triton_sorted.py plugins/triton_backend/tests/test_robustness.py plugins/triton_backend/tests/test_kernels.py > $OUT/gpu_tests4.txt 2>&1; echo "tests rc=$? $(( $(date +%s) - s )) s"; tail -5 $OUT/gpu_tests4.txt
