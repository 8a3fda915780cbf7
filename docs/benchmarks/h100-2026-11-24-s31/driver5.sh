# GPU call 5 (2026-11-24, session 31), the final code: int4 decode tiles with zero points made by inline PTX
# (gemm.biased_int4, W_PTX; symmetric codes unchanged), A/B in one process against HEAD 54e4cc8 (.scratch/s31_old); the
# weight-only and bench GPU tests; then moe-core bench of bf16, w4a16 and w4a16-zp decode with the new timer (the L2
# emptied by a read before each replay: moe_core.bench.timing.cold_l2_seconds).
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
D=docs/benchmarks/h100-2026-11-24-s31
T=plugins/triton_backend/tests
PYTHONPATH=$PWD/.scratch/s31_old timeout 200 python3 $D/int4_ab.py > $OUT/int4_ab_final.txt 2>&1; echo "ab rc=$? $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/int4_ab_final.txt | tail -20
timeout 150 moe-core bench --quiet --backends triton --peers= --preset qwen3-30b-a3b,mixtral-8x7b --scheme unquantized,w4a16,w4a16-zp --tokens 1,16,64 --reference-max-tokens 64 --json $OUT/bench_decode.json > $OUT/bench_decode.txt 2>&1; echo "bench rc=$? $(( $(date +%s) - s )) s"; cat $OUT/bench_decode.txt
timeout $(( 585 - ($(date +%s) - s) )) python3 -m pytest -q -p no:cacheprovider tests/test_bench_and_ranking.py $T/test_triton_weight_only.py -k "w4a16 or int4 or graph or cold or l2 or eager" 2>&1 | tail -15 > $OUT/gpu_tests5.txt; echo "tests $(( $(date +%s) - s )) s"; tail -4 $OUT/gpu_tests5.txt
