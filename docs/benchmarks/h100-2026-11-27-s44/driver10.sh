# GPU call 10 (2026-11-27, session 44): the tuner's tests on the final code (the full search now times its winner with
# MMA_IN_FLIGHT on too), in two parallel parts.
cd "$(dirname "$0")/../../.."
s=$(date +%s); T=plugins/triton_backend/tests
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; date -u +%H:%M:%S
python3 -m pytest -q -p no:cacheprovider --collect-only $T/test_triton_tune.py 2>/dev/null | grep "::" > /tmp/ids.txt
split -n r/2 /tmp/ids.txt /tmp/part_
for p in /tmp/part_*; do
  mapfile -t ids < $p
  timeout 200 python3 -m pytest -q -p no:cacheprovider "${ids[@]}" > $OUT/gpu_tests10_$(basename $p).txt 2>&1 &
done
wait; echo "tests $(wc -l < /tmp/ids.txt) after $(( $(date +%s) - s )) s"
tail -n 2 $OUT/gpu_tests10_*.txt | grep -E "passed|failed|error"; grep -h -E "^(FAILED|ERROR)" $OUT/gpu_tests10_*.txt | head -20
