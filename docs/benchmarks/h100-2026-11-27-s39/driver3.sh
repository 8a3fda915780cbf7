# GPU call 3 (2026-11-27, session 39): eager_profile.py (issue 12: what the GPU records of eager calls against graph
# replays of Mixtral at 4096 tokens, bf16 and fp8-block, the two rows eager_pairs.py left above graph + 40 us).
cd "$(dirname "$0")/../../.."
s=$(date +%s); D=docs/benchmarks/h100-2026-11-27-s39
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; date -u +%H:%M:%S
timeout 240 python3 $D/eager_profile.py > $OUT/eager_profile3.txt 2>&1
echo "profile rc=$? after $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/eager_profile3.txt
