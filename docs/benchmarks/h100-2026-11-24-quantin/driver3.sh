# GPU call 3 of 2026-11-24 (issue 12, QUANT_IN): the plugin's remaining GPU test files, robustness first (invalid
# routing through eager forwards that quantize inside the GEMMs).
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
T=plugins/triton_backend/tests
timeout 560 python3 -m pytest -q -p no:cacheprovider $T/test_robustness.py $T/test_triton_quant_out.py $T/test_triton_block_scales.py $T/test_triton_tune.py $T/test_triton_configs.py $T/test_triton_launch.py $T/test_triton_weight_only.py 2>&1 | tee $OUT/gpu_tests3.txt | tail -15; echo "tests $(( $(date +%s) - s )) s"
