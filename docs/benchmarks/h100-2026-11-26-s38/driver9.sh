# GPU call 9 (2026-11-26, session 38): the GPU tests of the files the shared block table touches; GEMM2 on GEMM1's
# block table against a table of its own (shared_table_ab.py); DeepSeek-V3's bench (its GEMM2 entry at 16384 tokens
# new) and issue 12's bench on the final code.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
timeout 200 python3 -m pytest -q -x -p no:cacheprovider plugins/triton_backend/tests/test_triton_shared_table.py plugins/triton_backend/tests/test_robustness.py plugins/triton_backend/tests/test_triton_tune.py > $OUT/gpu_tests9.txt 2>&1; echo "tests rc=$? $(( $(date +%s) - s )) s"; tail -3 $OUT/gpu_tests9.txt
timeout 130 python3 docs/benchmarks/h100-2026-11-26-s38/shared_table_ab.py 2>&1 | grep -v -i warn > $OUT/shared_table_ab9.txt; echo "ab rc=$? $(( $(date +%s) - s )) s"; cat $OUT/shared_table_ab9.txt
timeout 45 moe-core bench --quiet --backends triton --peers '' --preset deepseek-v3 --scheme fp8-block --tokens 16384 --reference-max-tokens 1 --json $OUT/deepseek9.json > $OUT/deepseek9.txt 2>&1; echo "deepseek rc=$? $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/deepseek9.txt | tail -3
timeout $(( s + 592 - $(date +%s) )) moe-core bench --quiet --backends triton --peers torch_grouped_mm --preset qwen3-30b-a3b,mixtral-8x7b --scheme unquantized,fp8-channel,fp8-block --tokens 1,2,4,16,64,1024,4096 --reference-max-tokens 64 --json $OUT/i12_s38_final.json > $OUT/i12_s38_final.txt 2>&1; echo "bench rc=$? $(( $(date +%s) - s )) s"
