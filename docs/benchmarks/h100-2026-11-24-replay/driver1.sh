# GPU call 1 (2026-11-24): replay tests and the tests they touch, the in-process A/B, then the issue-12 bench.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
T=plugins/triton_backend/tests
timeout 200 python3 -m pytest -q -p no:cacheprovider -x $T/test_triton_replay.py $T/test_triton_launch.py $T/test_triton_scratch.py 2>&1 | tail -15 > $OUT/gpu_tests1.txt; echo "tests rc=$? $(( $(date +%s) - s )) s"; tail -3 $OUT/gpu_tests1.txt
timeout 240 python3 docs/benchmarks/h100-2026-11-24-replay/replay_ab.py > $OUT/replay_ab.txt 2>&1; echo "ab rc=$? $(( $(date +%s) - s )) s"; cat $OUT/replay_ab.txt
B="moe-core bench --quiet --backends triton --peers torch_grouped_mm --preset qwen3-30b-a3b,mixtral-8x7b --scheme unquantized,fp8-channel,fp8-block --tokens 1,16,64,1024,4096 --reference-max-tokens 64"
date -u +%H:%M:%S; timeout $(( 585 - ($(date +%s) - s) )) $B --json $OUT/bench.json > $OUT/bench.txt 2>&1; echo "bench rc=$? $(( $(date +%s) - s )) s"
