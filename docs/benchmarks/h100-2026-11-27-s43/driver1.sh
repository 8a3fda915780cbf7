# GPU call 1 (2026-11-27, session 43): session 42's final code (w4a16-zp on bytes again, call 4's tiles), never run
# on the GPU: the int4 words, weight-only int4, GATE_UP, PTX and tuner tests in four parallel parts; then Qwen3-30B-A3B's
# w4a16 tiles at 4096 tokens searched on int4 words (session 42 left them as searched on bytes: -2.3%).
cd "$(dirname "$0")/../../.."
s=$(date +%s); T=plugins/triton_backend/tests; C=plugins/triton_backend/moe_core_triton/configs/nvidia_h100_80gb_hbm3.json
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; date -u +%H:%M:%S
python3 -m pytest -q -p no:cacheprovider --collect-only $T/test_triton_int4_words.py $T/test_triton_tune.py \
  $T/test_triton_weight_only.py -k "int4 or gate_and_up or by_ptx or tune or w4a16" 2>/dev/null | grep "::" > /tmp/ids.txt
split -n r/4 /tmp/ids.txt /tmp/part_
for p in /tmp/part_*; do
  mapfile -t ids < $p
  timeout 230 python3 -m pytest -q -p no:cacheprovider "${ids[@]}" > $OUT/gpu_tests1_$(basename $p).txt 2>&1 &
done
wait; echo "tests $(wc -l < /tmp/ids.txt) after $(( $(date +%s) - s )) s"
tail -n 2 $OUT/gpu_tests1_*.txt | grep -E "passed|failed|error"; grep -h -E "^(FAILED|ERROR)" $OUT/gpu_tests1_*.txt | head -20
timeout $(( s + 540 - $(date +%s) )) python3 -m moe_core_triton.tune --jobs 16 --preset qwen3-30b-a3b --scheme w4a16 \
  --tokens 4096 2>&1 | grep -v -i "warn\|skip" > $OUT/tune_1.txt
echo "tune rc=${PIPESTATUS[0]} after $(( $(date +%s) - s )) s"; cp $C $OUT/configs_after_call1.json; cut -c1-330 $OUT/tune_1.txt
