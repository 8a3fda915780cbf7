# GPU call 10 (2026-11-26, session 38): the final code's GPU tests of the tuner (GEMM2 candidates on GEMM1's table) and
# of the one-launch layer (its kernel class now made by compile_check.with_fused).
cd "$(dirname "$0")/../../.."
s=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
timeout 230 python3 -m pytest -q -p no:cacheprovider plugins/triton_backend/tests/test_triton_tune.py plugins/triton_backend/tests/test_triton_fused.py > $OUT/gpu_tests10.txt 2>&1; echo "tests rc=$? $(( $(date +%s) - s )) s"; tail -3 $OUT/gpu_tests10.txt
