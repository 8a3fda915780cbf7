# GPU call 6 (2026-11-24, session 30): the plugin's GPU tests at the final code (the new block-table kernel runs under
# every GEMM test above 64 pairs), as many files as the call's limit allows.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
T=plugins/triton_backend/tests
for f in test_kernels test_triton_weight_only test_triton_split_k test_triton_swap_ab test_triton_tma test_triton_quant_out test_triton_quant_in test_triton_block_scales test_plugin test_triton_launch; do
  left=$(( 585 - ($(date +%s) - s) )); [ $left -lt 20 ] && break
  timeout $left python3 -m pytest -q -p no:cacheprovider $T/$f.py 2>&1 | tail -6 > $OUT/gpu6_$f.txt; echo "$f rc=$? $(( $(date +%s) - s )) s: $(tail -1 $OUT/gpu6_$f.txt)"
done
