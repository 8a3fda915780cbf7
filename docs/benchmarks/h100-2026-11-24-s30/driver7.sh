# GPU call 7 (2026-11-24, session 30): GPU time per kernel of the Qwen3 layer at 64 and 4096 tokens (the block table's
# share), then the plugin test files call 6 did not reach.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
timeout 90 python3 benchmarks/profile_layer.py --preset qwen3-30b-a3b --scheme unquantized,fp8-block --tokens 64,4096 > $OUT/profile_qwen3.txt 2>&1; echo "profile rc=$? $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/profile_qwen3.txt
T=plugins/triton_backend/tests
for f in test_triton_swap_ab test_triton_tma test_triton_quant_out test_triton_quant_in test_triton_block_scales test_plugin test_triton_launch test_triton_tune test_triton_configs; do
  left=$(( 560 - ($(date +%s) - s) )); [ $left -lt 20 ] && break
  timeout $left python3 -m pytest -q -p no:cacheprovider $T/$f.py 2>&1 | tail -6 > $OUT/gpu7_$f.txt; echo "$f rc=$? $(( $(date +%s) - s )) s: $(tail -1 $OUT/gpu7_$f.txt)"
done
