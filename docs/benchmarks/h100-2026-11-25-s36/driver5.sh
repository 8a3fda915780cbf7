# GPU call 5 (2026-11-25, session 36): fused_probe.py diagnose: the wrong sums of calls 1 to 3, described; the same kernel
# with the float32 sum zeroed and cast by torch around it; the last program reading the sums by atomic exchanges.
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
timeout 500 python3 docs/benchmarks/h100-2026-11-25-s36/fused_probe.py diagnose 2>&1 | grep -v -i warn > $OUT/fused_probe5_diagnose.txt
cat $OUT/fused_probe5_diagnose.txt
