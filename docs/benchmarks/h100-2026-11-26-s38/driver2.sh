# GPU call 2 (2026-11-26, session 38): which part of GEMM2's input and output costs: ws_probe.py with A rows gathered
# through pointers or loaded by TMA, C rows scattered through pointers or stored by TMA (GEMM2 shapes of Qwen3 and
# Mixtral at 4096 tokens, DeepSeek-V3 at 16384); the Qwen3 plugin layer profiled per kernel; DeepSeek-V3's bench.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
P="python3 docs/benchmarks/h100-2026-11-26-s38/ws_probe.py --gemms 2 --configs 1,3 --modes grid,persistent --layouts tma-tma,gather-tma,tma-scatter,gather-scatter"
timeout 150 $P --preset qwen3-30b-a3b --tokens 4096 2>&1 | grep -v -i warn > $OUT/layout_qwen3_2.txt; echo "qwen3 rc=$? $(( $(date +%s) - s )) s"
timeout 120 $P --preset mixtral-8x7b --tokens 4096 --plugin-schemes '' 2>&1 | grep -v -i warn > $OUT/layout_mixtral_2.txt; echo "mixtral rc=$? $(( $(date +%s) - s )) s"
timeout 150 $P --preset deepseek-v3 --tokens 16384 --plugin-schemes '' 2>&1 | grep -v -i warn > $OUT/layout_deepseek_2.txt; echo "deepseek rc=$? $(( $(date +%s) - s )) s"
timeout $(( s + 575 - $(date +%s) )) moe-core bench --quiet --backends triton --peers '' --preset deepseek-v3 --scheme fp8-block --tokens 16384 --reference-max-tokens 1 --json $OUT/deepseek_bench2.json > $OUT/deepseek_bench2.txt 2>&1; echo "bench rc=$? $(( $(date +%s) - s )) s"
cat $OUT/layout_qwen3_2.txt $OUT/layout_mixtral_2.txt $OUT/layout_deepseek_2.txt; grep -v -i warn $OUT/deepseek_bench2.txt | tail -20
