# GPU call 8 (2026-11-27, session 39): eager batches after an untimed lead call (timing._cuda_batch_seconds). The
# bench's GPU tests, then issue 12's bench, the command of session 38's call 9, every row checked against the reference.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; date -u +%H:%M:%S
timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_bench_and_ranking.py > $OUT/gpu_tests8.txt 2>&1; tail -n 1 $OUT/gpu_tests8.txt
timeout $(( s + 560 - $(date +%s) )) moe-core bench --quiet --backends triton --peers torch_grouped_mm --preset qwen3-30b-a3b,mixtral-8x7b \
  --scheme unquantized,fp8-channel,fp8-block --tokens 1,2,4,16,64,1024,4096 --reference-max-tokens 64 --json $OUT/i12_s39.json > $OUT/i12_s39.txt 2>&1
echo "bench rc=$? after $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/i12_s39.txt | grep triton | cut -c1-150
