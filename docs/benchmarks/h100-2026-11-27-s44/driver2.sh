# GPU call 2 (2026-11-27, session 44), the code as committed (d48db67): (1) the GPU tests of the weight-only group
# steps, scales on the product, int4 words and tuner files, in four parallel parts (session 43's review mend, 998bbe5,
# had not run on the GPU); (2) issue 13's bench of w4a16-zp against bf16 in the same run, on the tiles session 43's
# call 10 searched (its cells were estimates).
cd "$(dirname "$0")/../../.."
s=$(date +%s); T=plugins/triton_backend/tests
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; date -u +%H:%M:%S
python3 -m pytest -q -p no:cacheprovider --collect-only $T/test_triton_weight_only.py $T/test_triton_int4_words.py \
  $T/test_triton_tune.py -k "group_steps or tile_product or int4 or w4a16 or tune or refine" 2>/dev/null | grep "::" > /tmp/ids.txt
split -n r/4 /tmp/ids.txt /tmp/part_
for p in /tmp/part_*; do
  mapfile -t ids < $p
  timeout 220 python3 -m pytest -q -p no:cacheprovider "${ids[@]}" > $OUT/gpu_tests2_$(basename $p).txt 2>&1 &
done
wait; echo "tests $(wc -l < /tmp/ids.txt) after $(( $(date +%s) - s )) s"
tail -n 2 $OUT/gpu_tests2_*.txt | grep -E "passed|failed|error"; grep -h -E "^(FAILED|ERROR)" $OUT/gpu_tests2_*.txt | head -20
timeout $(( s + 560 - $(date +%s) )) moe-core bench --quiet --backends triton --peers= --preset qwen3-30b-a3b,mixtral-8x7b \
  --scheme unquantized,w4a16-zp --tokens 1,16,64,4096 --reference-max-tokens 64 --json $OUT/zp2.json > $OUT/zp2.txt 2>&1
echo "bench rc=$? $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/zp2.txt | cut -c1-160
