# GPU call 1 (2026-11-27, session 42): int4 codes stored as words (int4_words.py). The A/B in one process against
# 1bccf07's plugin and data file (session 34's ab.py; the old plugin in .scratch/s42, not committed) at 1 to 4096
# tokens, then the words, weight-only, swapped-tile and fragment-order GPU tests in four parallel parts.
cd "$(dirname "$0")/../../.."
s=$(date +%s); D=docs/benchmarks; T=plugins/triton_backend/tests
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; date -u +%H:%M:%S
PYTHONPATH=$PWD/.scratch/s42 timeout 270 python3 $D/h100-2026-11-25-s34/ab.py \
  presets=mixtral-8x7b,qwen3-30b-a3b schemes=w4a16,w4a16-zp tokens=16,1,64,4096 > $OUT/ab1.txt 2>&1
echo "ab rc=$? after $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/ab1.txt
python3 -m pytest -q -p no:cacheprovider --collect-only $T/test_triton_int4_words.py $T/test_triton_e2m1_words.py \
  $T/test_triton_weight_only.py $T/test_triton_swap_ab.py $T/test_triton_k_order.py 2>/dev/null | grep "::" > /tmp/ids.txt
split -n r/4 /tmp/ids.txt /tmp/part_
for p in /tmp/part_*; do
  mapfile -t ids < $p
  timeout $(( s + 585 - $(date +%s) )) python3 -m pytest -q -p no:cacheprovider -x "${ids[@]}" > $OUT/gpu_tests1_$(basename $p).txt 2>&1 &
done
wait; echo "tests $(wc -l < /tmp/ids.txt) after $(( $(date +%s) - s )) s"
tail -n 2 $OUT/gpu_tests1_*.txt | grep -E "passed|failed|error"; grep -h -E "^(FAILED|ERROR)|Error" $OUT/gpu_tests1_*.txt | head -20
