# GPU call 3 (2026-11-24): the issue-12 bench with the plugin now (after) and at 6c91975 (before: the session's start,
# .scratch/before_replay from `git archive 6c91975 plugins/triton_backend`), one after the other in this call; then the
# kernels and plugin test files.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
OLD=$PWD/.scratch/before_replay/plugins/triton_backend
PYTHONPATH=$OLD python3 -c "import moe_core_triton, moe_core_triton.kernel as k; print('before package:', moe_core_triton.__file__, 'replays:', hasattr(k.TritonKernel, '_replay_signature'))"
B="moe-core bench --quiet --backends triton --peers torch_grouped_mm --preset qwen3-30b-a3b,mixtral-8x7b --scheme unquantized,fp8-channel,fp8-block --tokens 1,16,64,1024,4096 --reference-max-tokens 64"
date -u +%H:%M:%S; timeout 200 $B --json $OUT/after.json > $OUT/after.txt 2>&1; echo "after rc=$? $(( $(date +%s) - s )) s"
date -u +%H:%M:%S; PYTHONPATH=$OLD timeout 200 $B --json $OUT/before.json > $OUT/before.txt 2>&1; echo "before rc=$? $(( $(date +%s) - s )) s"
T=plugins/triton_backend/tests
timeout $(( 585 - ($(date +%s) - s) )) python3 -m pytest -q -p no:cacheprovider $T/test_kernels.py $T/test_plugin.py $T/test_triton_launch.py 2>&1 | tail -8 > $OUT/gpu_tests3.txt; echo "tests rc=$? $(( $(date +%s) - s )) s"; tail -3 $OUT/gpu_tests3.txt
