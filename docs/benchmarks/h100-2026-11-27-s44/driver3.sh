# GPU call 3 (2026-11-27, session 44): issue 12's bench on the code as committed (d48db67), the command of session 38's
# call 9 and session 39's call 8, every row checked against the reference.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; date -u +%H:%M:%S
timeout $(( s + 585 - $(date +%s) )) moe-core bench --quiet --backends triton --peers torch_grouped_mm --preset qwen3-30b-a3b,mixtral-8x7b \
  --scheme unquantized,fp8-channel,fp8-block --tokens 1,2,4,16,64,1024,4096 --reference-max-tokens 64 --json $OUT/i12_s44.json > $OUT/i12_s44.txt 2>&1
echo "bench rc=$? after $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/i12_s44.txt | grep triton | cut -c1-150
