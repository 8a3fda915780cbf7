# GPU call 5 (2026-11-24, session 32): e4m3 codes made exact 16-bit values in PTX (gemm.e4m3_values): the e4m3 unit and
# fp8 weight-only tests, an A/B in one process against HEAD 767cce1 (.scratch/s32_old) for fp8-w8a16 and fp8-block-w8a16,
# then Mixtral-8x7B decode tiles for fp8-w8a16, fp8-block-w8a16 and w8a16-zp (the file had none) refined from seeds
# copied from Mixtral w8a16's entries (configs_seeded5.json).
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
D=docs/benchmarks/h100-2026-11-24-s32
T=plugins/triton_backend/tests
timeout 150 python3 -m pytest -q -p no:cacheprovider $T/test_triton_weight_only.py -k "fp8 or e4m3 or ptx or e2m1" 2>&1 | tail -4 > $OUT/gpu_tests5.txt; echo "tests $(( $(date +%s) - s )) s"; tail -2 $OUT/gpu_tests5.txt
PYTHONPATH=$PWD/.scratch/s32_old timeout 200 python3 $D/fp4_ab.py fp8-w8a16 fp8-block-w8a16 > $OUT/fp8_ab.txt 2>&1; echo "ab rc=$? $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/fp8_ab.txt | tail -20
cp $D/configs_seeded5.json plugins/triton_backend/moe_core_triton/configs/nvidia_h100_80gb_hbm3.json
timeout $(( 585 - ($(date +%s) - s) )) python3 -m moe_core_triton.tune --refine --preset mixtral-8x7b --scheme fp8-w8a16,fp8-block-w8a16,w8a16-zp --tokens 1,16,64 > $OUT/tune_refine5.txt 2>&1; echo "refine rc=$? $(( $(date +%s) - s )) s"; grep "T=" $OUT/tune_refine5.txt | cut -c1-200
cp plugins/triton_backend/moe_core_triton/configs/nvidia_h100_80gb_hbm3.json $OUT/configs_after_call5.json
