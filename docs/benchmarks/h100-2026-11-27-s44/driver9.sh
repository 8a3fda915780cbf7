# GPU call 9 (2026-11-27, session 44): issue 13's bench at 4096 tokens of the weight-only layers whose data-file
# entries now ask for MMA_IN_FLIGHT, against bf16 in the same run (the final code).
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; date -u +%H:%M:%S
timeout 330 moe-core bench --quiet --backends triton --peers= --preset qwen3-30b-a3b,mixtral-8x7b \
  --scheme unquantized,w8a16,w8a16-zp,fp8-w8a16,fp8-block-w8a16,w4a16-zp --tokens 4096 --reference-max-tokens 64 \
  --json $OUT/wo9.json > $OUT/wo9.txt 2>&1
echo "bench rc=$? $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/wo9.txt | cut -c1-150
