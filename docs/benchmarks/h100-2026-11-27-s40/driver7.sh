# GPU call 7 (2026-11-27, session 40): the batched-format weight-only test, now also with GATE_UP GEMM1 tiles, and the
# GATE_UP tests, compiled on the GPU.
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%H:%M:%S
cd plugins/triton_backend && timeout 400 python3 -m pytest -q -p no:cacheprovider tests/test_triton_weight_only.py \
  -k "batched_format or gate" > $OUT/gpu_tests7.txt 2>&1; echo "rc=$?"; tail -3 $OUT/gpu_tests7.txt
