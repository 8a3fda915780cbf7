# GPU call 9 (2026-11-27, session 43): GROUP_STEPS, a launch-config choice (call 8 had made every such tile run so):
# the data file asks for it in the three w4a16 entries call 8 measured faster with it. The GPU tests of the weight-only
# group steps, scales, int4 and tuner files in four parallel parts; the A/B against 600e7b6's plugin (.scratch/s43_old,
# not committed); issue 13's bench of w4a16 at 1 to 64 tokens against bf16 in the same run.
cd "$(dirname "$0")/../../.."
s=$(date +%s); D=docs/benchmarks; T=plugins/triton_backend/tests
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; date -u +%H:%M:%S
python3 -m pytest -q -p no:cacheprovider --collect-only $T/test_triton_weight_only.py $T/test_triton_int4_words.py \
  $T/test_triton_tune.py -k "group_steps or tile_product or int4 or w4a16 or tune or refine" 2>/dev/null | grep "::" > /tmp/ids.txt
split -n r/4 /tmp/ids.txt /tmp/part_
for p in /tmp/part_*; do
  mapfile -t ids < $p
  timeout 200 python3 -m pytest -q -p no:cacheprovider "${ids[@]}" > $OUT/gpu_tests9_$(basename $p).txt 2>&1 &
done
wait; echo "tests $(wc -l < /tmp/ids.txt) after $(( $(date +%s) - s )) s"
tail -n 2 $OUT/gpu_tests9_*.txt | grep -E "passed|failed|error"; grep -h -E "^(FAILED|ERROR)" $OUT/gpu_tests9_*.txt | head -20
PYTHONPATH=$PWD/.scratch/s43_old timeout 120 python3 $D/h100-2026-11-25-s34/ab.py presets=mixtral-8x7b,qwen3-30b-a3b \
  schemes=w4a16 tokens=16,64,1 > $OUT/ab9.txt 2>&1
echo "ab rc=$? after $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/ab9.txt
timeout $(( s + 560 - $(date +%s) )) moe-core bench --quiet --backends triton --peers= --preset mixtral-8x7b,qwen3-30b-a3b \
  --scheme unquantized,w4a16 --tokens 1,16,64 --reference-max-tokens 64 --json $OUT/wo9.json > $OUT/wo9.txt 2>&1
echo "wo rc=$? $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/wo9.txt | cut -c1-150
