# GPU call 2 (2026-11-24, session 32): fp4 decode tiles tuned for the exact-value path (W_CODES 3): Mixtral-8x7B mxfp4
# (the file had no Mixtral fp4 entries; full candidate search) and Qwen3-30B-A3B nvfp4 (full search), written into the
# package's H100 file on the GPU machine and copied back.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
timeout 330 python3 -m moe_core_triton.tune --preset mixtral-8x7b --scheme mxfp4 --tokens 1,16,64 > $OUT/tune_mixtral_mxfp4.txt 2>&1; echo "tune rc=$? $(( $(date +%s) - s )) s"; grep -v -i "warn\|skip" $OUT/tune_mixtral_mxfp4.txt | tail -8
cp plugins/triton_backend/moe_core_triton/configs/nvidia_h100_80gb_hbm3.json $OUT/configs_after_call2a.json
timeout $(( 585 - ($(date +%s) - s) )) python3 -m moe_core_triton.tune --preset qwen3-30b-a3b --scheme nvfp4-w4a16 --tokens 1,16,64 > $OUT/tune_qwen3_nvfp4.txt 2>&1; echo "tune rc=$? $(( $(date +%s) - s )) s"; grep -v -i "warn\|skip" $OUT/tune_qwen3_nvfp4.txt | tail -8
cp plugins/triton_backend/moe_core_triton/configs/nvidia_h100_80gb_hbm3.json $OUT/configs_after_call2.json
