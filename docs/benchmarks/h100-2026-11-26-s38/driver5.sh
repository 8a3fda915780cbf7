# GPU call 5 (2026-11-26, session 38): per-kernel times of the sorted intermediate against the layout by pair, and
# ptxas's register and spill report of each GEMM (sorted_profile.py), after moving GEMM1's table-order rows into its
# epilogue.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
timeout 400 python3 docs/benchmarks/h100-2026-11-26-s38/sorted_profile.py 2>&1 | grep -v -i warn > $OUT/sorted_profile5.txt; echo "rc=$? $(( $(date +%s) - s )) s"; cat $OUT/sorted_profile5.txt
