# GPU call 6 (2026-11-27, session 39): eager_profile.py with 12 alternating rounds (8 eager calls, then 8 graph
# replays, each window recorded by the profiler) for Mixtral at 4096 tokens in bf16, fp8-block and fp8-channel.
cd "$(dirname "$0")/../../.."
s=$(date +%s); D=docs/benchmarks/h100-2026-11-27-s39
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; date -u +%H:%M:%S
timeout 280 python3 $D/eager_profile.py rounds=12 \
  cases=mixtral-8x7b:unquantized:4096,mixtral-8x7b:fp8-block:4096,mixtral-8x7b:fp8-channel:4096 > $OUT/eager_profile6.txt 2>&1
echo "profile rc=$? after $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/eager_profile6.txt
