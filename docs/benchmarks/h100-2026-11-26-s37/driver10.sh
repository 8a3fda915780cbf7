# GPU call 10 (2026-11-26, session 37), the final code: issue 12's bench in one run (triton against torch._grouped_mm,
# Qwen3-30B-A3B and Mixtral-8x7B, unquantized / fp8-channel / fp8-block, 1 to 4096 tokens; the roofline now the mean
# over the input sets); session 31's plain read of a one-token Qwen3 layer's bytes, again in this run.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
timeout 120 python3 docs/benchmarks/h100-2026-11-24-s31/stream_ceiling.py 2>&1 | grep -v -i warn > $OUT/stream_ceiling10.txt; echo "stream $(( $(date +%s) - s )) s"; cat $OUT/stream_ceiling10.txt
timeout $(( s + 560 - $(date +%s) )) moe-core bench --quiet --backends triton --peers torch_grouped_mm --preset qwen3-30b-a3b,mixtral-8x7b --scheme unquantized,fp8-channel,fp8-block --tokens 1,2,4,16,64,1024,4096 --reference-max-tokens 64 --json $OUT/i12_s37.json > $OUT/i12_s37.txt 2>&1
echo "bench rc=$? $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/i12_s37.txt | head -90
