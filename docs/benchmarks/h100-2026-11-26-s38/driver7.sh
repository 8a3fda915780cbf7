# GPU call 7 (2026-11-26, session 38): issue 12's bench with the paired back-to-back graph column (graph b2b), the
# same command as session 37's call 10; the bench file's GPU tests; DeepSeek-V3 fp8-block at 16384 tokens.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_bench_and_ranking.py > $OUT/gpu_tests7.txt 2>&1; echo "tests rc=$?"; tail -2 $OUT/gpu_tests7.txt
timeout $(( s + 555 - $(date +%s) )) moe-core bench --quiet --backends triton --peers torch_grouped_mm --preset qwen3-30b-a3b,mixtral-8x7b --scheme unquantized,fp8-channel,fp8-block --tokens 1,2,4,16,64,1024,4096 --reference-max-tokens 64 --json $OUT/i12_s38.json > $OUT/i12_s38.txt 2>&1
echo "bench rc=$? $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/i12_s38.txt | head -60
timeout $(( s + 590 - $(date +%s) )) moe-core bench --quiet --backends triton --peers '' --preset deepseek-v3 --scheme fp8-block --tokens 16384 --reference-max-tokens 1 --json $OUT/deepseek7.json > $OUT/deepseek7.txt 2>&1; echo "deepseek rc=$? $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/deepseek7.txt | tail -3
