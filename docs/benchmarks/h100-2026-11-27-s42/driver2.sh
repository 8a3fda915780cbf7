# GPU call 2 (2026-11-27, session 42): tiles searched again on int4 words: Mixtral-8x7B w4a16-zp at 4096 tokens (its
# GEMM1 entry was a GATE_UP tile, which int4 words do not run), then w4a16's decode tiles (1, 16, 64 tokens) of
# Qwen3-30B-A3B and Mixtral-8x7B, then w4a16 at 4096 tokens as time allows. The tuner writes the file after each case.
cd "$(dirname "$0")/../../.."
s=$(date +%s); C=plugins/triton_backend/moe_core_triton/configs/nvidia_h100_80gb_hbm3.json
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; date -u +%H:%M:%S
tune() { timeout $(( s + $1 - $(date +%s) )) python3 -m moe_core_triton.tune --jobs 16 "${@:2}" 2>&1 | grep -v -i "warn\|skip" >> $OUT/tune_2.txt
         echo "tune ${*:2} rc=${PIPESTATUS[0]} after $(( $(date +%s) - s )) s"; cp $C $OUT/configs_after_call2.json; }
tune 150 --preset mixtral-8x7b --scheme w4a16-zp --tokens 4096
tune 480 --preset qwen3-30b-a3b,mixtral-8x7b --scheme w4a16 --tokens 1,16,64
tune 585 --preset qwen3-30b-a3b,mixtral-8x7b --scheme w4a16 --tokens 4096
cut -c1-330 $OUT/tune_2.txt | grep GEMM
