# GPU call 12 (2026-11-26, session 37): eager_control.py, the Mixtral rows of call 10 whose eager time exceeded the
# graph time by more than 40 µs, timed with graph replays back to back as the control.
cd "$(dirname "$0")/../../.."
s=$(date +%s); E=docs/benchmarks/h100-2026-11-26-s37
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
cd $E && timeout 300 python3 eager_control.py 2>&1 | grep -v -i warn > $OUT/eager_control12.txt
echo "rc=${PIPESTATUS[0]} $(( $(date +%s) - s )) s"; cat $OUT/eager_control12.txt
