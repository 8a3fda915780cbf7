# GPU call 6 (2026-11-26, session 38): GEMM2 tiles of the fp8 prefill layers in the whole layer (gemm2_tiles.py).
cd "$(dirname "$0")/../../.."
s=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
timeout 560 python3 docs/benchmarks/h100-2026-11-26-s38/gemm2_tiles.py 2>&1 | grep -v -i warn > $OUT/gemm2_tiles6.txt; echo "rc=$? $(( $(date +%s) - s )) s"; cat $OUT/gemm2_tiles6.txt
