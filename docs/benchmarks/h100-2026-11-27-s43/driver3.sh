# GPU call 3 (2026-11-27, session 43): the final code and data file. gpt-oss-20b's mxfp4 against bf16 Triton in one run
# (issue 13's third preset), every row checked against the reference; then every weight-only GPU test (the weight-only,
# int4 words, e2m1 words, fragment-order and swapped-tile files) in four parallel parts.
cd "$(dirname "$0")/../../.."
s=$(date +%s); T=plugins/triton_backend/tests
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; date -u +%H:%M:%S
timeout 200 moe-core bench --quiet --backends triton --peers= --preset gpt-oss-20b --scheme unquantized,mxfp4 \
  --tokens 1,16,64,4096 --reference-max-tokens 64 --json $OUT/gptoss3.json > $OUT/gptoss3.txt 2>&1
echo "gptoss rc=$? $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/gptoss3.txt | cut -c1-150
python3 -m pytest -q -p no:cacheprovider --collect-only $T/test_triton_weight_only.py $T/test_triton_int4_words.py \
  $T/test_triton_e2m1_words.py $T/test_triton_k_order.py $T/test_triton_swap_ab.py 2>/dev/null | grep "::" > /tmp/ids.txt
split -n r/4 /tmp/ids.txt /tmp/part_
for p in /tmp/part_*; do
  mapfile -t ids < $p
  timeout $(( s + 570 - $(date +%s) )) python3 -m pytest -q -p no:cacheprovider "${ids[@]}" > $OUT/gpu_tests3_$(basename $p).txt 2>&1 &
done
wait; echo "tests $(wc -l < /tmp/ids.txt) after $(( $(date +%s) - s )) s"
tail -n 2 $OUT/gpu_tests3_*.txt | grep -E "passed|failed|error"; grep -h -E "^(FAILED|ERROR)" $OUT/gpu_tests3_*.txt | head -20
