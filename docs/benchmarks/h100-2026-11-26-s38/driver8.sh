# GPU call 8 (2026-11-26, session 38): GEMM2 tiles by kernel time with GEMM1 as the control (gemm2_kernel_ab.py).
cd "$(dirname "$0")/../../.."
s=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
timeout 500 python3 docs/benchmarks/h100-2026-11-26-s38/gemm2_kernel_ab.py 2>&1 | grep -v -i warn > $OUT/gemm2_kernel_ab8.txt; echo "rc=$? $(( $(date +%s) - s )) s"; cat $OUT/gemm2_kernel_ab8.txt
