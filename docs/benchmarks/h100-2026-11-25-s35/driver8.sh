# GPU call 8 (2026-11-25, session 35): full searches, now with the K-256 tiles in tune._TILES, of the cells below 1.6x
# (w8a16-zp: Qwen3 16 and 64 tokens, Mixtral 1, 16 and 64) and of w4a16 at 16 and 64 tokens (Mixtral also 1). Every
# case compiled at once first, then timed from the cache; then the bench of those schemes and the A/B against the
# data file before this call (.scratch/s35_k256, the plugin at HEAD before it).
cd "$(dirname "$0")/../../.."
s=$(date +%s); C=plugins/triton_backend/moe_core_triton/configs/nvidia_h100_80gb_hbm3.json
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
export OMP_NUM_THREADS=1
for c in qwen3-30b-a3b:16 qwen3-30b-a3b:64 mixtral-8x7b:1 mixtral-8x7b:16 mixtral-8x7b:64; do IFS=: read -r p t <<< "$c"
  for n in w8a16-zp w4a16; do python3 -m moe_core_triton.tune --compile-only --preset $p --scheme $n --tokens $t > /dev/null 2>&1 & done
done
wait; echo "compiled after $(( $(date +%s) - s )) s"
timeout $(( s + 400 - $(date +%s) )) python3 -m moe_core_triton.tune --preset qwen3-30b-a3b --scheme w8a16-zp,w4a16 --tokens 16,64 2>&1 | grep -v -i "warn\|skip" > $OUT/tune_8.txt
timeout $(( s + 430 - $(date +%s) )) python3 -m moe_core_triton.tune --preset mixtral-8x7b --scheme w8a16-zp,w4a16 --tokens 1,16,64 2>&1 | grep -v -i "warn\|skip" >> $OUT/tune_8.txt
echo "tuned after $(( $(date +%s) - s )) s"; cp $C $OUT/configs_after_call8.json
timeout $(( 520 - ($(date +%s) - s) )) moe-core bench --quiet --backends triton --peers= --preset qwen3-30b-a3b,mixtral-8x7b --scheme unquantized,w4a16,w8a16-zp --tokens 1,16,64 --reference-max-tokens 64 --json $OUT/wo8.json > $OUT/wo8.txt 2>&1; echo "bench rc=$? $(( $(date +%s) - s )) s"
PYTHONPATH=$PWD/.scratch/s35_k256 timeout $(( 590 - ($(date +%s) - s) )) python3 docs/benchmarks/h100-2026-11-25-s34/ab.py schemes=w4a16,w8a16-zp tokens=1,16,64 > $OUT/ab8.txt 2>&1
echo "ab rc=$? $(( $(date +%s) - s )) s"
cut -c1-260 $OUT/tune_8.txt; grep -v -i warn $OUT/wo8.txt | cut -c1-120; grep -v -i warn $OUT/ab8.txt
