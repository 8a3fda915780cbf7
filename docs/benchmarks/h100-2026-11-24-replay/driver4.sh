# GPU call 4 (2026-11-24): replays of every eager standard-format forward (buffers a forward allocates are allocated
# anew by each replay): the in-process A/B of large forwards, then the replay tests (a 12000-pair forward included),
# then the kernels and plugin test files as far as the call's limit allows.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
timeout 150 python3 docs/benchmarks/h100-2026-11-24-replay/replay_ab.py large > $OUT/replay_ab_large.txt 2>&1; echo "ab rc=$? $(( $(date +%s) - s )) s"; cat $OUT/replay_ab_large.txt
T=plugins/triton_backend/tests
timeout 200 python3 -m pytest -q -p no:cacheprovider $T/test_triton_replay.py 2>&1 | tail -15 > $OUT/gpu_tests4_replay.txt; echo "replay tests rc=$? $(( $(date +%s) - s )) s"; tail -3 $OUT/gpu_tests4_replay.txt
timeout $(( 585 - ($(date +%s) - s) )) python3 -m pytest -q -p no:cacheprovider $T/test_kernels.py $T/test_triton_split_k.py $T/test_triton_swap_ab.py 2>&1 | tail -8 > $OUT/gpu_tests4.txt; echo "tests $(( $(date +%s) - s )) s"; tail -3 $OUT/gpu_tests4.txt
