# GPU call 5 (2026-11-26, session 37): the one-launch layer's fixed costs. GPU tests of the fused file (the w2 prefetch
# against the reference); fused_tail_ab.py: casting the sums in one step, and prefetching w2's first columns into the L2.
cd "$(dirname "$0")/../../.."
s=$(date +%s); E=docs/benchmarks/h100-2026-11-26-s37
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
(cd plugins/triton_backend && timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_triton_fused.py 2>&1 | tail -4) > $OUT/gpu_tests5.txt
echo "tests $(( $(date +%s) - s )) s"; cat $OUT/gpu_tests5.txt
timeout $(( s + 540 - $(date +%s) )) python3 $E/fused_tail_ab.py 1,2,4 2>&1 | grep -v -i warn > $OUT/fused_tail_ab5.txt
echo "ab rc=${PIPESTATUS[0]} $(( $(date +%s) - s )) s"; cat $OUT/fused_tail_ab5.txt
