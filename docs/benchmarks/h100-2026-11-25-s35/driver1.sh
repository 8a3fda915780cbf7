# GPU call 1 (2026-11-25, session 35): w8a16 and w8a16-zp codes in fragment order (WeightOnly.permutes widened), stored
# as int8 (w8a16-zp: kernel.signed_bytes) and made 16-bit values by Triton's bit operations. Full tile search of both
# schemes on both presets at 1, 16, 64 and 4096 tokens, by the tuner's own two phases (--jobs 16: compile every case's
# candidates at once, then time each case alone).
cd "$(dirname "$0")/../../.."
s=$(date +%s); C=plugins/triton_backend/moe_core_triton/configs/nvidia_h100_80gb_hbm3.json
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"
timeout $(( s + 580 - $(date +%s) )) python3 -m moe_core_triton.tune --jobs 16 --preset qwen3-30b-a3b,mixtral-8x7b \
  --scheme w8a16,w8a16-zp --tokens 1,16,64,4096 2>&1 | grep -v -i "warn\|skip" > $OUT/tune_1.txt
echo "rc=${PIPESTATUS[0]} after $(( $(date +%s) - s )) s"
cp $C $OUT/configs_after_call1.json
cut -c1-400 $OUT/tune_1.txt
