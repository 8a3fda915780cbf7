cd "$(dirname "$0")/.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
T=plugins/triton_backend/tests
timeout 150 python3 -m pytest -q -p no:cacheprovider $T/test_robustness.py $T/test_kernels.py $T/test_triton_scratch.py -k "table or invalid or garbage or scratch or graph" 2>&1 | tail -3 | tee $OUT/tests_table.txt
echo "tests $(( $(date +%s) - s )) s"
OLD=$PWD/.scratch/before_table/plugins/triton_backend
P="python3 benchmarks/profile_layer.py --preset qwen3-30b-a3b --scheme unquantized,fp8-block --tokens 1,16"
B="moe-core bench --quiet --backends triton --peers= --preset qwen3-30b-a3b,mixtral-8x7b --scheme unquantized,fp8-block --tokens 1,16 --reference-max-tokens 16"
(echo "## after"; timeout 60 $P; echo "## before (af78e0d)"; PYTHONPATH=$OLD timeout 60 $P) 2>&1 | grep -v Warn | tee $OUT/profile_table.txt
(echo "## after"; timeout 80 $B; echo "## before (af78e0d)"; PYTHONPATH=$OLD timeout 80 $B; echo "## after, again"; timeout 80 $B) 2>&1 | tee $OUT/bench_table.txt | cut -c1-150
echo "all $(( $(date +%s) - s )) s"
