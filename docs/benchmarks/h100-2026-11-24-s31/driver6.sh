# GPU call 6 (2026-11-24, session 31), final code: the best plain read of a one-token Qwen3 layer's bytes
# (stream_ceiling.py); issue 12's bench with the new timer (graph replays timed with the L2 emptied by a read); the
# tuner's refinements of w4a16-zp decode tiles now that their values are made by PTX (into a separate file).
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
D=docs/benchmarks/h100-2026-11-24-s31
timeout 120 python3 $D/stream_ceiling.py > $OUT/stream_ceiling.txt 2>&1; echo "stream rc=$? $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/stream_ceiling.txt
timeout 200 moe-core bench --quiet --backends triton --peers torch_grouped_mm --preset qwen3-30b-a3b,mixtral-8x7b --scheme unquantized,fp8-channel,fp8-block --tokens 1,16,64,1024,4096 --reference-max-tokens 64 --json $OUT/i12_cold_read.json > $OUT/i12_cold_read.txt 2>&1; echo "bench rc=$? $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/i12_cold_read.txt | head -70
timeout $(( 585 - ($(date +%s) - s) )) python3 -m moe_core_triton.tune --preset qwen3-30b-a3b,mixtral-8x7b --scheme w4a16-zp --tokens 1,16,64 --refine --out $OUT/zp_refined.json > $OUT/zp_refine.txt 2>&1; echo "tune rc=$? $(( $(date +%s) - s )) s"; grep -v -i "warn\|skip" $OUT/zp_refine.txt | tail -12
