# GPU call 6 (2026-11-25, session 36): the one-launch layer in the plugin (fused.py). GPU tests of the fused, configs and
# tune files; pair_sum_stress.py (the two-GEMM layer's in-kernel top-k sum, 300 forwards each); tune --fused for both
# presets' PairTable token counts (writes the data file's gemm=fused entries); issue 12's bench at 1 to 16 tokens.
cd "$(dirname "$0")/../../.."
s=$(date +%s); D=docs/benchmarks/h100-2026-11-25-s36; C=plugins/triton_backend/moe_core_triton/configs/nvidia_h100_80gb_hbm3.json
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
(cd plugins/triton_backend && timeout 150 python3 -m pytest -q -x tests/test_triton_fused.py tests/test_triton_configs.py tests/test_triton_tune.py -k "fused or configs" 2>&1 | tail -4) > $OUT/gpu_tests6.txt
echo "tests $(( $(date +%s) - s )) s"; cat $OUT/gpu_tests6.txt
timeout 90 python3 $D/pair_sum_stress.py 2>&1 | grep -v -i warn > $OUT/pair_sum_stress.txt; echo "stress $(( $(date +%s) - s )) s"; cat $OUT/pair_sum_stress.txt
timeout $(( s + 430 - $(date +%s) )) python3 -m moe_core_triton.tune --fused --jobs 10 --preset qwen3-30b-a3b --scheme unquantized --tokens 1,2,4,8 2>&1 | grep -v -i "warn\|skip" > $OUT/tune_fused_qwen3.txt
timeout $(( s + 470 - $(date +%s) )) python3 -m moe_core_triton.tune --fused --jobs 6 --preset mixtral-8x7b --scheme unquantized --tokens 1,4,16,32 2>&1 | grep -v -i "warn\|skip" > $OUT/tune_fused_mixtral.txt
echo "tune $(( $(date +%s) - s )) s"; cat $OUT/tune_fused_*.txt; cp $C $OUT/configs_after_call6.json
timeout $(( s + 585 - $(date +%s) )) moe-core bench --quiet --backends triton --peers torch_grouped_mm --preset qwen3-30b-a3b,mixtral-8x7b --scheme unquantized --tokens 1,2,4,8,16 --reference-max-tokens 64 --json $OUT/bench_fused.json > $OUT/bench_fused.txt 2>&1
echo "bench rc=$? $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/bench_fused.txt | head -40
