# GPU call 8 (2026-11-24): a signature's launches are recorded at its second forward, not its first: the replay tests,
# then a short bench of the decode cases (eager and host columns) at this code.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
T=plugins/triton_backend/tests
timeout 400 python3 -m pytest -q -p no:cacheprovider $T/test_triton_replay.py 2>&1 | tail -15 > $OUT/gpu_tests8.txt; echo "tests rc=$? $(( $(date +%s) - s )) s"; tail -3 $OUT/gpu_tests8.txt
timeout $(( 590 - ($(date +%s) - s) )) moe-core bench --quiet --backends triton --peers= --preset qwen3-30b-a3b,mixtral-8x7b --scheme unquantized,fp8-channel,fp8-block --tokens 1,16 --reference-max-tokens 64 --json $OUT/bench_decode.json > $OUT/bench_decode.txt 2>&1; echo "bench rc=$? $(( $(date +%s) - s )) s"; cat $OUT/bench_decode.txt
