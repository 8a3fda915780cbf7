# GPU call 4 (2026-11-27, session 40): the tile search at 4096 tokens for every weight-only scheme of Qwen3-30B-A3B
# (GATE_UP candidates included), then issue 13's bench at 4096 tokens on Qwen3 if time is left.
cd "$(dirname "$0")/../../.."
s=$(date +%s); C=plugins/triton_backend/moe_core_triton/configs/nvidia_h100_80gb_hbm3.json
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; date -u +%H:%M:%S
W=w4a16,w4a16-zp,w8a16,w8a16-zp,fp8-w8a16,fp8-block-w8a16,nvfp4-w4a16,mxfp4
timeout $(( s + 480 - $(date +%s) )) python3 -m moe_core_triton.tune --jobs 16 --preset qwen3-30b-a3b --scheme $W --tokens 4096 2>&1 \
  | grep -v -i "warn\|skip" > $OUT/tune_4.txt
echo "tune rc=${PIPESTATUS[0]} after $(( $(date +%s) - s )) s"; cp $C $OUT/configs_after_call4.json; cut -c1-330 $OUT/tune_4.txt | tail -20
