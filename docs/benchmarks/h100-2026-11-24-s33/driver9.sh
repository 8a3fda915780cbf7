# GPU call 9 (2026-11-25, session 33): fp8_probe.py, a full search of Qwen3 fp8-w8a16 decode tiles at 16 tokens on
# codes in fragment order (a probe for the next session; nothing in the package changes).
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
timeout 500 python3 docs/benchmarks/h100-2026-11-24-s33/fp8_probe.py $OUT/fp8_probe.json 2>&1 | grep -v -i "warn\|skip" > $OUT/fp8_probe.txt
echo "probe rc=$? $(( $(date +%s) - s )) s"; cut -c1-400 $OUT/fp8_probe.txt
