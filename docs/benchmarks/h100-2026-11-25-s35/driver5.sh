# GPU call 5 (2026-11-25, session 35): call 4's test files again, in four pytest processes at once (compiling is most of
# their time; call 4 ran them in one process and reached 113 of them, none failing, in its 480 s).
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
T=plugins/triton_backend/tests  # node ids are relative to the repository root (pytest's rootdir)
F="$T/test_triton_k_order.py $T/test_triton_configs.py $T/test_triton_tune.py $T/test_triton_weight_only.py"
python3 -m pytest -q -p no:cacheprovider --collect-only $F 2>/dev/null | grep "::" > /tmp/ids.txt
split -n r/4 /tmp/ids.txt /tmp/part_
for p in /tmp/part_*; do
  mapfile -t ids < $p  # ids hold spaces ("integer ops")
  timeout 560 python3 -m pytest -q -p no:cacheprovider "${ids[@]}" > $OUT/gpu_tests5_$(basename $p).txt 2>&1 &
done
wait; echo "tests $(wc -l < /tmp/ids.txt) after $(( $(date +%s) - s )) s"
tail -n 3 $OUT/gpu_tests5_*.txt | grep -E "passed|failed|error|==>"
grep -h -E "^(FAILED|ERROR)" $OUT/gpu_tests5_*.txt | head -20
