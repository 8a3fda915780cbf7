# GPU call 1 (2026-11-24, session 32): e2m1 codes made exact 16-bit values by a PTX table lookup and scaled in 16 bits
# (W_CODES 3): the fp4 unit and GEMM tests against the reference, then an A/B in one process against HEAD 767cce1
# (.scratch/s32_old) for mxfp4 and nvfp4 on Qwen3-30B-A3B, Mixtral-8x7B and gpt-oss-20b.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
D=docs/benchmarks/h100-2026-11-24-s32
T=plugins/triton_backend/tests
timeout 200 python3 -m pytest -q -p no:cacheprovider $T/test_triton_weight_only.py -k "fp4 or e2m1 or ptx or int4" 2>&1 | tail -8 > $OUT/gpu_tests1.txt; echo "tests rc=$? $(( $(date +%s) - s )) s"; tail -4 $OUT/gpu_tests1.txt
PYTHONPATH=$PWD/.scratch/s32_old timeout $(( 580 - ($(date +%s) - s) )) python3 $D/fp4_ab.py > $OUT/fp4_ab.txt 2>&1; echo "ab rc=$? $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/fp4_ab.txt | tail -30
