# GPU call 8 (2026-11-24, session 31): Mixtral-8x7B w4a16 (symmetric) decode tiles re-tuned with the new timer (the full candidate
# search, written into the package's H100 file on the GPU machine and copied back), then moe-core bench of bf16, w4a16
# and w4a16-zp at 1, 16 and 64 tokens with them (the new timer).
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
timeout 420 python3 -m moe_core_triton.tune --preset mixtral-8x7b --scheme w4a16 --tokens 1,16,64 > $OUT/tune_mixtral_w4a16.txt 2>&1; echo "tune rc=$? $(( $(date +%s) - s )) s"; grep -v -i "warn\|skip" $OUT/tune_mixtral_w4a16.txt | tail -8
cp plugins/triton_backend/moe_core_triton/configs/nvidia_h100_80gb_hbm3.json $OUT/configs_after_call8.json
timeout $(( 590 - ($(date +%s) - s) )) moe-core bench --quiet --backends triton --peers= --preset mixtral-8x7b --scheme unquantized,w4a16,w4a16-zp --tokens 1,16,64 --reference-max-tokens 64 --json $OUT/bench_w4a16_tuned.json > $OUT/bench_w4a16_tuned.txt 2>&1; echo "bench rc=$? $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/bench_w4a16_tuned.txt
