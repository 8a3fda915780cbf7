# GPU call 2 (2026-11-25, session 34): full searches on codes in fragment order, swapped tiles only (tune.candidates'
# swapped_only, after call 1 found the swapped tile fastest in all 15 of its searches): Mixtral fp8-w8a16 at 64 and
# 4096 tokens (call 1 ran out of time there), mxfp4 on both presets at 1, 16, 64 and 4096 tokens and on gpt-oss-20b at
# 1 to 4096; then Qwen3 fp8-block-w8a16 refined from fp8-w8a16's new tiles (copied into its entries before the call).
cd "$(dirname "$0")/../../.."
s=$(date +%s); D=docs/benchmarks/h100-2026-11-25-s34
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
bash $D/search.sh 2 $(( s + 540 )) 1,16,64,4096 mixtral-8x7b:fp8-w8a16:64,4096 qwen3-30b-a3b:mxfp4 mixtral-8x7b:mxfp4 \
  gpt-oss-20b:mxfp4:1,16,64,256,1024,4096
timeout $(( 590 - ($(date +%s) - s) )) python3 -m moe_core_triton.tune --refine --preset qwen3-30b-a3b --scheme fp8-block-w8a16 \
  --tokens 1,16,64,4096 2>&1 | grep -v -i "warn\|skip" >> $OUT/tune_2.txt
echo "refine rc=${PIPESTATUS[0]} $(( $(date +%s) - s )) s"
cp plugins/triton_backend/moe_core_triton/configs/nvidia_h100_80gb_hbm3.json $OUT/configs_after_2.json
cut -c1-420 $OUT/tune_2.txt
