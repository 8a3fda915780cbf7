# GPU call 3 (2026-11-25, session 36): fused_probe.py race (the row sum through shared memory or not),
# tokens (Qwen3 1 to 8 tokens), tune (columns per program, 1 and 2 tokens).
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
for part in race tokens tune; do
  timeout $(( s + 580 - $(date +%s) )) python3 docs/benchmarks/h100-2026-11-25-s36/fused_probe.py $part 2>&1 | grep -v -i warn > $OUT/fused_probe3_$part.txt
  echo "$part rc=${PIPESTATUS[0]} after $(( $(date +%s) - s )) s"
done
cat $OUT/fused_probe3_*.txt
