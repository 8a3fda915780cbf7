# GPU call 5 (2026-11-27, session 41): the rest of call 4's search (Mixtral-8x7B mxfp4 at 16 and 64 tokens) and
# gpt-oss-20b's mxfp4 decode tiles at 1, 16 and 64 tokens on e2m1 words, then the weight-only, words, swapped-tile,
# fragment-order and tuner GPU tests in four parallel parts.
cd "$(dirname "$0")/../../.."
s=$(date +%s); C=plugins/triton_backend/moe_core_triton/configs/nvidia_h100_80gb_hbm3.json; T=plugins/triton_backend/tests
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; date -u +%H:%M:%S
timeout 150 python3 -m moe_core_triton.tune --jobs 16 --preset mixtral-8x7b --scheme mxfp4 --tokens 16,64 2>&1 \
  | grep -v -i "warn\|skip" > $OUT/tune_5.txt
echo "tune rc=${PIPESTATUS[0]} after $(( $(date +%s) - s )) s"
timeout $(( s + 330 - $(date +%s) )) python3 -m moe_core_triton.tune --jobs 16 --preset gpt-oss-20b --scheme mxfp4 --tokens 1,16,64 2>&1 \
  | grep -v -i "warn\|skip" >> $OUT/tune_5.txt
echo "tune rc=${PIPESTATUS[0]} after $(( $(date +%s) - s )) s"; cp $C $OUT/configs_after_call5.json; cut -c1-250 $OUT/tune_5.txt | grep GEMM
python3 -m pytest -q -p no:cacheprovider --collect-only $T/test_triton_weight_only.py $T/test_triton_e2m1_words.py $T/test_triton_swap_ab.py \
  $T/test_triton_tune.py $T/test_triton_k_order.py 2>/dev/null | grep "::" > /tmp/ids.txt
split -n r/4 /tmp/ids.txt /tmp/part_
for p in /tmp/part_*; do
  mapfile -t ids < $p
  timeout $(( s + 585 - $(date +%s) )) python3 -m pytest -q -p no:cacheprovider "${ids[@]}" > $OUT/gpu_tests5_$(basename $p).txt 2>&1 &
done
wait; echo "tests $(wc -l < /tmp/ids.txt) after $(( $(date +%s) - s )) s"
tail -n 2 $OUT/gpu_tests5_*.txt | grep -E "passed|failed|error"; grep -h -E "^(FAILED|ERROR)" $OUT/gpu_tests5_*.txt | head -20
