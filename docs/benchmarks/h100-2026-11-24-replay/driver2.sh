# GPU call 2 (2026-11-24): replays of block-table forwards too: the replay, robustness (the
# conformance kit's 2000 garbage calls now replay), QUANT_IN and scratch tests; then the in-process A/B of block-table
# forwards.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
git log --oneline | head -1
T=plugins/triton_backend/tests
timeout 420 python3 -m pytest -q -p no:cacheprovider $T/test_triton_replay.py $T/test_robustness.py $T/test_triton_scratch.py $T/test_triton_quant_in.py 2>&1 | tail -15 > $OUT/gpu_tests2.txt; echo "tests rc=$? $(( $(date +%s) - s )) s"; tail -3 $OUT/gpu_tests2.txt
timeout $(( 590 - ($(date +%s) - s) )) python3 docs/benchmarks/h100-2026-11-24-replay/replay_ab.py tables > $OUT/replay_ab_tables.txt 2>&1; echo "ab rc=$? $(( $(date +%s) - s )) s"; cat $OUT/replay_ab_tables.txt
