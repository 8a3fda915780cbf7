# GPU call 3 (2026-11-24, session 31): int4 decode tiles from inline PTX (gemm.biased_int4), A/B in one process against
# HEAD 54e4cc8 (.scratch/s31_old), then the weight-only GPU tests.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
D=docs/benchmarks/h100-2026-11-24-s31
T=plugins/triton_backend/tests
PYTHONPATH=$PWD/.scratch/s31_old timeout 260 python3 $D/int4_ab.py > $OUT/int4_ab.txt 2>&1; echo "ab rc=$? $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/int4_ab.txt | tail -20
timeout $(( 580 - ($(date +%s) - s) )) python3 -m pytest -q -p no:cacheprovider $T/test_triton_weight_only.py -k "int4 or w4a16 or graph or conformance" 2>&1 | tail -15 > $OUT/gpu_tests3.txt; echo "tests $(( $(date +%s) - s )) s"; tail -4 $OUT/gpu_tests3.txt
