# GPU call 6 (2026-11-27, session 40): call 5's GPU test files again on the final code, with time to finish: the
# weight-only, swapped-tile and tuner files and the shared-table file, in four parallel parts.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; date -u +%H:%M:%S
T=plugins/triton_backend/tests
python3 -m pytest -q -p no:cacheprovider --collect-only $T/test_triton_weight_only.py $T/test_triton_swap_ab.py $T/test_triton_tune.py \
  $T/test_triton_shared_table.py 2>/dev/null | grep "::" > /tmp/ids.txt
split -n r/4 /tmp/ids.txt /tmp/part_
for p in /tmp/part_*; do
  mapfile -t ids < $p
  timeout 540 python3 -m pytest -q -p no:cacheprovider "${ids[@]}" > $OUT/gpu_tests6_$(basename $p).txt 2>&1 &
done
wait; echo "tests $(wc -l < /tmp/ids.txt) after $(( $(date +%s) - s )) s"
tail -n 2 $OUT/gpu_tests6_*.txt | grep -E "passed|failed|error"; grep -h -E "^(FAILED|ERROR)" $OUT/gpu_tests6_*.txt | head -20
