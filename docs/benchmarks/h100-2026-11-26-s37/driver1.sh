# GPU call 1 (2026-11-26, session 37): session 36's driver 6, which never ran, in a new order. The two-GEMM layer's
# in-kernel top-k sum under stress (pair_sum_stress.py: 300 forwards, every output the same bits); the GPU tests of the
# one-launch layer (fused, configs, tune files); tune --fused for Qwen3-30B-A3B and Mixtral-8x7B (writes the data
# file's gemm=fused entries); fused_ab.py: the data file's choice against the two GEMMs in one process.
cd "$(dirname "$0")/../../.."
s=$(date +%s); D=docs/benchmarks/h100-2026-11-25-s36; E=docs/benchmarks/h100-2026-11-26-s37
C=plugins/triton_backend/moe_core_triton/configs/nvidia_h100_80gb_hbm3.json
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
python3 -c "import torch, triton; print(torch.__version__, triton.__version__, torch.version.cuda)"
timeout 100 python3 $D/pair_sum_stress.py 2>&1 | grep -v -i warn > $OUT/pair_sum_stress1.txt; echo "stress rc=${PIPESTATUS[0]} $(( $(date +%s) - s )) s"; cat $OUT/pair_sum_stress1.txt
(cd plugins/triton_backend && timeout 160 python3 -m pytest -q -p no:cacheprovider tests/test_triton_fused.py tests/test_triton_configs.py tests/test_triton_tune.py -k "fused or configs" 2>&1 | tail -6) > $OUT/gpu_tests1.txt
echo "tests $(( $(date +%s) - s )) s"; cat $OUT/gpu_tests1.txt
timeout $(( s + 400 - $(date +%s) )) python3 -m moe_core_triton.tune --fused --jobs 12 --preset qwen3-30b-a3b --scheme unquantized --tokens 1,2,4,8 2>&1 | grep -v -i "warn\|skip" > $OUT/tune_fused1.txt
timeout $(( s + 450 - $(date +%s) )) python3 -m moe_core_triton.tune --fused --jobs 6 --preset mixtral-8x7b --scheme unquantized --tokens 1,2 2>&1 | grep -v -i "warn\|skip" >> $OUT/tune_fused1.txt
echo "tune $(( $(date +%s) - s )) s"; cat $OUT/tune_fused1.txt; cp $C $OUT/configs_after_call1.json
timeout $(( s + 585 - $(date +%s) )) python3 $E/fused_ab.py qwen3-30b-a3b:1,2,4,8,16 mixtral-8x7b:1,2,4 2>&1 | grep -v -i warn > $OUT/fused_ab1.txt
echo "ab rc=${PIPESTATUS[0]} $(( $(date +%s) - s )) s"; cat $OUT/fused_ab1.txt
