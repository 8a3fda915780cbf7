# GPU call 3 (2026-11-27, session 41; stopped by a wrong 32-row swapped GEMM2 candidate: PTX words then restricted to
# Hopper warpgroup tiles, kernel.words_by_ptx): the decode tiles of nvfp4 searched again on e2m1 words (GEMM1 in GATE_UP tiles),
# Qwen3-30B-A3B and Mixtral-8x7B at 1, 16 and 64 tokens (call 2's A/B: nvfp4 decode 2 to 10% slower on the old tiles).
cd "$(dirname "$0")/../../.."
s=$(date +%s); C=plugins/triton_backend/moe_core_triton/configs/nvidia_h100_80gb_hbm3.json
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; date -u +%H:%M:%S
timeout $(( s + 585 - $(date +%s) )) python3 -m moe_core_triton.tune --jobs 16 --preset qwen3-30b-a3b,mixtral-8x7b \
  --scheme nvfp4-w4a16 --tokens 1,16,64 2>&1 | grep -v -i "warn\|skip" > $OUT/tune_3.txt
echo "tune rc=${PIPESTATUS[0]} after $(( $(date +%s) - s )) s"; cp $C $OUT/configs_after_call3.json; cut -c1-330 $OUT/tune_3.txt | tail -20
