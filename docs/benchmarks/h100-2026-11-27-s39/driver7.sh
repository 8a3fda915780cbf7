# GPU call 7 (2026-11-27, session 39): the bench's new "idle e / g" column (timing.gpu_idle_time). Its GPU tests,
# then issue 12's bench on both presets at 1, 16, 1024 and 4096 tokens (bf16, fp8-channel, fp8-block), every row
# checked against the reference.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; date -u +%H:%M:%S
timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_bench_and_ranking.py > $OUT/gpu_tests7.txt 2>&1
tail -n 3 $OUT/gpu_tests7.txt
timeout $(( s + 450 - $(date +%s) )) moe-core bench --quiet --backends triton --peers= --preset qwen3-30b-a3b,mixtral-8x7b \
  --scheme unquantized,fp8-channel,fp8-block --tokens 1,16,1024,4096 --reference-max-tokens 64 --json $OUT/i12_idle7.json > $OUT/i12_idle7.txt 2>&1
echo "bench rc=$? after $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/i12_idle7.txt | cut -c1-175
