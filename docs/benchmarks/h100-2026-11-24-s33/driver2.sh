# GPU call 2 (2026-11-24, session 33): fragment order for symmetric int4 only (call 1: the other schemes' unswapped
# decode tiles lost 15 to 55% on it), prefill tiles of 4-bit, e4m3 and e2m1 codes scaled in bfloat16: the A/B in one
# process against HEAD b2a3dfb (.scratch/s33_old) for every scheme at 1, 16, 64 and 4096 tokens, then the weight-only
# and k_order GPU tests.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
D=docs/benchmarks/h100-2026-11-24-s33
T=plugins/triton_backend/tests
PYTHONPATH=$PWD/.scratch/s33_old timeout 300 python3 $D/ab.py > $OUT/ab2.txt 2>&1; echo "ab rc=$? $(( $(date +%s) - s )) s"
timeout $(( 590 - ($(date +%s) - s) )) python3 -m pytest -q -p no:cacheprovider $T/test_triton_k_order.py $T/test_triton_weight_only.py 2>&1 | tail -6 > $OUT/gpu_tests2.txt; echo "tests $(( $(date +%s) - s )) s"; tail -3 $OUT/gpu_tests2.txt
grep -v -i warn $OUT/ab2.txt | tail -90
