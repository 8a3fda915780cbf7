# GPU call 5 (2026-11-24, session 30): Mixtral fp8-block at 4096 tokens (1.43x bf16, target 1.5x): its GEMMs tuned
# with the fp8 tiles of call 2 (written into the packaged data file, copied to $OUT), then bf16 and fp8-block benched.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
D=docs/benchmarks/h100-2026-11-24-s30
timeout 300 python3 $D/tune_fp8_tiles.py --preset mixtral-8x7b --scheme fp8-block --tokens 4096 > $OUT/tune_mixtral_fp8.txt 2>&1; echo "tune rc=$? $(( $(date +%s) - s )) s"; grep -v "^  skip" $OUT/tune_mixtral_fp8.txt | grep -v "^        [0-9]\{5\}\|^       [3-9][0-9]\{3\}\."
cp plugins/triton_backend/moe_core_triton/configs/nvidia_h100_80gb_hbm3.json $OUT/
timeout $(( 590 - ($(date +%s) - s) )) moe-core bench --quiet --backends triton --peers torch_grouped_mm --preset mixtral-8x7b --scheme unquantized,fp8-block --tokens 1024,4096 --reference-max-tokens 64 --json $OUT/mixtral_fp8.json > $OUT/mixtral_fp8.txt 2>&1; echo "bench rc=$? $(( $(date +%s) - s )) s"; tail -12 $OUT/mixtral_fp8.txt
