# GPU call 7 (2026-11-24): TritonKernel.replays (False: every forward in full), used by the tests' full-forward kernels:
# the replay file again.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
T=plugins/triton_backend/tests
timeout 400 python3 -m pytest -q -p no:cacheprovider $T/test_triton_replay.py 2>&1 | tail -15 > $OUT/gpu_tests7.txt; echo "tests rc=$? $(( $(date +%s) - s )) s"; tail -3 $OUT/gpu_tests7.txt
