# GPU call 5 (2026-11-24): replays rebuild the weights' tensor descriptors (TMA_B prefill configs): the replay tests,
# the in-process A/B of large forwards, then the issue-12 bench now (after) and at 6c91975 (before,
# .scratch/before_replay), one after the other.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
T=plugins/triton_backend/tests
timeout 220 python3 -m pytest -q -p no:cacheprovider $T/test_triton_replay.py 2>&1 | tail -15 > $OUT/gpu_tests5_replay.txt; echo "replay tests rc=$? $(( $(date +%s) - s )) s"; tail -3 $OUT/gpu_tests5_replay.txt
timeout 100 python3 docs/benchmarks/h100-2026-11-24-replay/replay_ab.py large > $OUT/replay_ab_large.txt 2>&1; echo "ab rc=$? $(( $(date +%s) - s )) s"; cat $OUT/replay_ab_large.txt
OLD=$PWD/.scratch/before_replay/plugins/triton_backend
B="moe-core bench --quiet --backends triton --peers torch_grouped_mm --preset qwen3-30b-a3b,mixtral-8x7b --scheme unquantized,fp8-channel,fp8-block --tokens 1,16,64,1024,4096 --reference-max-tokens 64"
date -u +%H:%M:%S; timeout 120 $B --json $OUT/final_after.json > $OUT/final_after.txt 2>&1; echo "after rc=$? $(( $(date +%s) - s )) s"
date -u +%H:%M:%S; PYTHONPATH=$OLD timeout $(( 590 - ($(date +%s) - s) )) $B --json $OUT/final_before.json > $OUT/final_before.txt 2>&1; echo "before rc=$? $(( $(date +%s) - s )) s"
