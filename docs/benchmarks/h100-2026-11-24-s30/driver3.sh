# GPU call 3 (2026-11-24, session 30): the new block-table kernel: its GPU tests (tables against a Python model, one
# program and several, the invalid-id property, graph capture, replays), the one-program variants again with the old
# kernel beside it, and the table at every size (benchmarks/block_tables.py).
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
D=docs/benchmarks/h100-2026-11-24-s30
T=plugins/triton_backend/tests
timeout 100 python3 $D/table_variants2.py > $OUT/table_variants3.txt 2>&1; echo "variants rc=$? $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/table_variants3.txt
timeout 100 python3 benchmarks/block_tables.py --json $OUT/block_tables.json > $OUT/block_tables.txt 2>&1; echo "tables rc=$? $(( $(date +%s) - s )) s"; cat $OUT/block_tables.txt
timeout 150 python3 -m pytest -q -p no:cacheprovider $T/test_kernels.py -k "table or graph or expert_map" 2>&1 | tail -15 > $OUT/gpu_tests3a.txt; echo "kernels rc=$? $(( $(date +%s) - s )) s"; tail -4 $OUT/gpu_tests3a.txt
timeout $(( 590 - ($(date +%s) - s) )) python3 -m pytest -q -p no:cacheprovider $T/test_robustness.py $T/test_triton_replay.py $T/test_triton_scratch.py 2>&1 | tail -15 > $OUT/gpu_tests3b.txt; echo "tests rc=$? $(( $(date +%s) - s )) s"; tail -4 $OUT/gpu_tests3b.txt
