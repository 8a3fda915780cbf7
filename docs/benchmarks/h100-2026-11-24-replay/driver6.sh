# GPU call 6 (2026-11-24): the final code (ThreadLog shared by the launch and allocation records; tests tidied): the
# replay, launch and scratch test files, then the in-process A/B of forwards of few pairs again.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
T=plugins/triton_backend/tests
timeout 300 python3 -m pytest -q -p no:cacheprovider $T/test_triton_replay.py $T/test_triton_launch.py $T/test_triton_scratch.py 2>&1 | tail -15 > $OUT/gpu_tests6.txt; echo "tests rc=$? $(( $(date +%s) - s )) s"; tail -3 $OUT/gpu_tests6.txt
timeout $(( 590 - ($(date +%s) - s) )) python3 docs/benchmarks/h100-2026-11-24-replay/replay_ab.py pairs > $OUT/replay_ab_pairs.txt 2>&1; echo "ab rc=$? $(( $(date +%s) - s )) s"; cat $OUT/replay_ab_pairs.txt
