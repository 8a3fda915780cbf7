# GPU call 5 (2026-11-24, session 33), an experiment: w4a16-zp, fp8-w8a16 and fp8-block-w8a16 codes stored in fragment
# order too (kernel.WeightOnly.permutes widened), their entries seeded from w4a16's swapped tiles (configs_seeded5.json)
# and refined (`tune --refine`) at 1, 16, 64 and 4096 tokens on both presets. The A/B against HEAD 21cf731 follows in
# call 6.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
C=plugins/triton_backend/moe_core_triton/configs/nvidia_h100_80gb_hbm3.json
for p in qwen3-30b-a3b mixtral-8x7b; do
  timeout $(( 560 - ($(date +%s) - s) )) python3 -m moe_core_triton.tune --preset $p --scheme fp8-w8a16,w4a16-zp,fp8-block-w8a16 --tokens 1,16,64,4096 --refine 2>&1 | grep -v -i "warn\|skip" >> $OUT/tune5.txt
  echo "tune $p rc=$? $(( $(date +%s) - s )) s"; cp $C $OUT/configs_after_call5.json
done
cut -c1-200 $OUT/tune5.txt
