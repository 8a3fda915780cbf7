# GPU call 2 (2026-11-27, session 40): the searches call 1 ran out of time for (GATE_UP candidates included):
# Mixtral-8x7B fp8-block-w8a16, nvfp4-w4a16 and mxfp4 at 4096 tokens, and gpt-oss-20b mxfp4 at 4096.
cd "$(dirname "$0")/../../.."
s=$(date +%s); C=plugins/triton_backend/moe_core_triton/configs/nvidia_h100_80gb_hbm3.json
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; date -u +%H:%M:%S
W=fp8-block-w8a16,nvfp4-w4a16,mxfp4
timeout $(( s + 585 - $(date +%s) )) python3 -m moe_core_triton.tune --jobs 16 --preset mixtral-8x7b --scheme $W --tokens 4096 2>&1 \
  | grep -v -i "warn\|skip" > $OUT/tune_2.txt
echo "tune rc=${PIPESTATUS[0]} after $(( $(date +%s) - s )) s"; cp $C $OUT/configs_after_call2.json; cut -c1-330 $OUT/tune_2.txt | tail -20
timeout $(( s + 585 - $(date +%s) )) python3 -m moe_core_triton.tune --jobs 16 --preset gpt-oss-20b --scheme mxfp4 --tokens 4096 2>&1 \
  | grep -v -i "warn\|skip" > $OUT/tune_2b.txt
echo "tune rc=${PIPESTATUS[0]} after $(( $(date +%s) - s )) s"; cp $C $OUT/configs_after_call2.json; cut -c1-330 $OUT/tune_2b.txt | tail -4
