cd "$(dirname "$0")/.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend > /dev/null 2>&1
T=plugins/triton_backend/tests
timeout 200 python3 -m pytest -q -x -p no:cacheprovider $T/test_kernels.py $T/test_robustness.py $T/test_triton_launch.py $T/test_triton_scratch.py > $OUT/tests.txt 2>&1; tail -3 $OUT/tests.txt; echo "tests $(( $(date +%s) - s )) s"
timeout 60 python3 benchmarks/block_tables.py --json $OUT/block_tables.json > $OUT/block_tables.txt 2>&1; cut -c1-140 $OUT/block_tables.txt
timeout 60 python3 benchmarks/profile_layer.py --preset qwen3-30b-a3b --scheme unquantized,fp8-channel,fp8-block --tokens 1,64 > $OUT/profile.txt 2>&1
grep -i "table" $OUT/profile.txt | head -24
OLD=$PWD/.scratch/before26  # git archive 8899157 plugins/triton_backend/plugins/triton_backend
for round in 1 2 3; do
  timeout 50 python3 .scratch/alt_host.py after >> $OUT/alt.txt 2>&1
  PYTHONPATH=$OLD timeout 50 python3 .scratch/alt_host.py before >> $OUT/alt.txt 2>&1
done
echo "all $(( $(date +%s) - s )) s"
