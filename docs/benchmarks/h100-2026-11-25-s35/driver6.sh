# GPU call 6 (2026-11-25, session 35): deep_decode_probe.py at 1 and 16 tokens, both presets, w4a16, w8a16,
# fp8-w8a16 and mxfp4 (codes in fragment order): every case compiled at once first, then timed one after another.
cd "$(dirname "$0")/../../.."
s=$(date +%s); D=docs/benchmarks/h100-2026-11-25-s35
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
export OMP_NUM_THREADS=1
cases="$(for p in qwen3-30b-a3b mixtral-8x7b; do for n in w4a16 w8a16 fp8-w8a16 mxfp4; do for t in 1 16; do echo $p:$n:$t; done; done; done)"
for c in $cases; do IFS=: read -r p n t <<< "$c"; timeout 300 python3 $D/deep_decode_probe.py $p $n $t --compile-only > /dev/null 2>&1 & done
wait; echo "compiled after $(( $(date +%s) - s )) s"
for c in $cases; do IFS=: read -r p n t <<< "$c"
  timeout $(( 580 - ($(date +%s) - s) )) python3 $D/deep_decode_probe.py $p $n $t 2>&1 | grep -v -i "warn" >> $OUT/deep_decode.txt
done
echo "timed after $(( $(date +%s) - s )) s"
grep -v "^  " $OUT/deep_decode.txt | cut -c1-250
