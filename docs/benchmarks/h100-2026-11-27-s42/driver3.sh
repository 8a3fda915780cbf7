# GPU call 3 (2026-11-27, session 42): the final code (int4 words; a 256-row GATE_UP entry runs as a 128-row tile over
# them) and data file (w4a16's decode tiles from call 2). The GPU tests call 1 failed on and the tuner's, then the A/B
# against 1bccf07's plugin and data file, then issue 13's bench of the int4 schemes against bf16 Triton in the same run.
cd "$(dirname "$0")/../../.."
s=$(date +%s); D=docs/benchmarks; T=plugins/triton_backend/tests
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; date -u +%H:%M:%S
python3 -m pytest -q -p no:cacheprovider --collect-only $T/test_triton_int4_words.py $T/test_triton_tune.py \
  $T/test_triton_weight_only.py -k "int4 or gate_and_up or by_ptx or tune or w4a16" 2>/dev/null | grep "::" > /tmp/ids.txt
split -n r/4 /tmp/ids.txt /tmp/part_
for p in /tmp/part_*; do
  mapfile -t ids < $p
  timeout 200 python3 -m pytest -q -p no:cacheprovider "${ids[@]}" > $OUT/gpu_tests3_$(basename $p).txt 2>&1 &
done
wait; echo "tests $(wc -l < /tmp/ids.txt) after $(( $(date +%s) - s )) s"
tail -n 2 $OUT/gpu_tests3_*.txt | grep -E "passed|failed|error"; grep -h -E "^(FAILED|ERROR)" $OUT/gpu_tests3_*.txt | head -20
PYTHONPATH=$PWD/.scratch/s42 timeout $(( s + 340 - $(date +%s) )) python3 $D/h100-2026-11-25-s34/ab.py \
  presets=mixtral-8x7b,qwen3-30b-a3b schemes=w4a16,w4a16-zp tokens=16,1,64,4096 > $OUT/ab3.txt 2>&1
echo "ab rc=$? after $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/ab3.txt
timeout $(( s + 540 - $(date +%s) )) moe-core bench --quiet --backends triton --peers= --preset qwen3-30b-a3b,mixtral-8x7b \
  --scheme unquantized,w4a16,w4a16-zp --tokens 1,16,64,4096 --reference-max-tokens 64 --json $OUT/wo3.json > $OUT/wo3.txt 2>&1
echo "wo rc=$? $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/wo3.txt | cut -c1-150
