# GPU call 2 (2026-11-24, session 30): one-program block-table steps (issue 12), fp8 prefill tiles at 4096 tokens
# (issue 12), the weight-only prefill tiles of fp8-w8a16 and mxfp4 (issue 13).
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
D=docs/benchmarks/h100-2026-11-24-s30
timeout 200 python3 $D/table_variants2.py > $OUT/table_variants2.txt 2>&1; echo "tables rc=$? $(( $(date +%s) - s )) s"; grep -v Warn $OUT/table_variants2.txt
timeout 200 python3 $D/fp8_prefill_tiles.py qwen3-30b-a3b:fp8-channel:4096 qwen3-30b-a3b:fp8-block:4096 qwen3-30b-a3b:unquantized:4096 > $OUT/fp8_tiles.txt 2>&1; echo "fp8 rc=$? $(( $(date +%s) - s )) s"; grep -v "^  skip" $OUT/fp8_tiles.txt
timeout $(( 585 - ($(date +%s) - s) )) python3 $D/wo_prefill_tiles.py qwen3-30b-a3b:mxfp4:4096 qwen3-30b-a3b:fp8-w8a16:4096 mixtral-8x7b:fp8-w8a16:4096 > $OUT/wo_tiles2.txt 2>&1; echo "wo rc=$? $(( $(date +%s) - s )) s"; grep -v "^  skip" $OUT/wo_tiles2.txt
