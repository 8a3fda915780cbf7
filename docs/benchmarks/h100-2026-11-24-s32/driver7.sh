# GPU call 7 (2026-11-24, session 32), the final code: the Triton plugin's GPU test files this session's calls had not
# run (conformance kit, SWAP_AB, TMA, fused quantization, scratch, launch), then the core's tests that run the Triton
# backend on a GPU.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
T=plugins/triton_backend/tests
timeout 420 python3 -m pytest -q -p no:cacheprovider $T/test_kernels.py $T/test_triton_swap_ab.py $T/test_triton_tma.py $T/test_triton_quant_in.py $T/test_triton_quant_out.py $T/test_triton_scratch.py $T/test_triton_launch.py $T/test_triton_block_scales.py 2>&1 | tail -6 > $OUT/gpu_tests7a.txt; echo "plugin tests $(( $(date +%s) - s )) s"; tail -3 $OUT/gpu_tests7a.txt
timeout $(( 580 - ($(date +%s) - s) )) python3 -m pytest -q -p no:cacheprovider tests/test_bench_and_ranking.py 2>&1 | tail -4 > $OUT/gpu_tests7b.txt; echo "core tests $(( $(date +%s) - s )) s"; tail -2 $OUT/gpu_tests7b.txt
