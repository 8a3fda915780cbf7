# GPU call 9 (2026-11-24, session 31), the final code: the launch, replay, scratch and robustness tests (Launcher._entry
# now serves both the launch and the replay's direct lookup), then the whole weight-only file.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
T=plugins/triton_backend/tests
timeout 300 python3 -m pytest -q -p no:cacheprovider $T/test_triton_launch.py $T/test_triton_replay.py $T/test_triton_scratch.py $T/test_robustness.py 2>&1 | tail -6 > $OUT/gpu_tests9a.txt; echo "host path $(( $(date +%s) - s )) s"; tail -2 $OUT/gpu_tests9a.txt
timeout $(( 585 - ($(date +%s) - s) )) python3 -m pytest -q -p no:cacheprovider $T/test_triton_weight_only.py 2>&1 | tail -6 > $OUT/gpu_tests9b.txt; echo "weight-only $(( $(date +%s) - s )) s"; tail -2 $OUT/gpu_tests9b.txt
