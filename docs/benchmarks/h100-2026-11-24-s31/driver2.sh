# GPU call 2 (2026-11-24, session 31): GEMM2 as a programmatic dependent launch of GEMM1, A/B in one process
# (pdl_ab.py), with and without the L2 prefetch of GEMM2's weights; the GPU tests of forwards that use it.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
D=docs/benchmarks/h100-2026-11-24-s31
T=plugins/triton_backend/tests
timeout 250 python3 $D/pdl_ab.py > $OUT/pdl_ab.txt 2>&1; echo "ab rc=$? $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/pdl_ab.txt
timeout 150 python3 -m pytest -q -x -p no:cacheprovider $T/test_kernels.py -k "graph or pair or expert_map or reference" 2>&1 | tail -8 > $OUT/gpu_tests2a.txt; echo "kernels rc=$? $(( $(date +%s) - s )) s"; tail -3 $OUT/gpu_tests2a.txt
timeout $(( 585 - ($(date +%s) - s) )) python3 $D/pdl_ab.py noprefetch > $OUT/pdl_ab_noprefetch.txt 2>&1; echo "ab2 rc=$? $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/pdl_ab_noprefetch.txt
