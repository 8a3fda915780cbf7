# GPU call 6 (2026-11-25, session 34): rows256_probe.py for fp8-w8a16, mxfp4 and w4a16 at 4096 tokens on both presets:
# first every case at once (compiling into Triton's cache, timings thrown away), then each alone.
cd "$(dirname "$0")/../../.."
s=$(date +%s); D=docs/benchmarks/h100-2026-11-25-s34
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
export OMP_NUM_THREADS=1
CASES="qwen3-30b-a3b:fp8-w8a16 mixtral-8x7b:fp8-w8a16 qwen3-30b-a3b:mxfp4 mixtral-8x7b:mxfp4 qwen3-30b-a3b:w4a16 mixtral-8x7b:w4a16"
for c in $CASES; do timeout 200 python3 $D/rows256_probe.py ${c%%:*} ${c##*:} > /dev/null 2>&1 & done; wait
echo "compile phase $(( $(date +%s) - s )) s"
for c in $CASES; do timeout $(( 400 - ($(date +%s) - s) )) python3 $D/rows256_probe.py ${c%%:*} ${c##*:} 2>&1 | grep -v -i "warn" >> $OUT/rows256.txt; done
echo "done $(( $(date +%s) - s )) s"; cut -c1-420 $OUT/rows256.txt
