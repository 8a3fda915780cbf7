# GPU call 1 (2026-11-26, session 38): ws_probe.py, a persistent TMA grouped fp8-block GEMM with and without Triton's
# warp specialization, on the prefill shapes of issue 12's fp8 targets, beside the plugin's layer profiled per kernel.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
P=docs/benchmarks/h100-2026-11-26-s38/ws_probe.py
timeout 260 python3 $P --preset qwen3-30b-a3b --tokens 4096 2>&1 | grep -v -i warn > $OUT/ws_qwen3_1.txt; echo "qwen3 rc=$? $(( $(date +%s) - s )) s"
timeout $(( s + 450 - $(date +%s) )) python3 $P --preset deepseek-v3 --tokens 16384 --configs 0,1,2,3 --plugin-schemes fp8-block 2>&1 | grep -v -i warn > $OUT/ws_deepseek_1.txt; echo "deepseek rc=$? $(( $(date +%s) - s )) s"
timeout $(( s + 570 - $(date +%s) )) python3 $P --preset mixtral-8x7b --tokens 4096 --configs 0,1 2>&1 | grep -v -i warn > $OUT/ws_mixtral_1.txt; echo "mixtral rc=$? $(( $(date +%s) - s )) s"
cat $OUT/ws_qwen3_1.txt $OUT/ws_deepseek_1.txt $OUT/ws_mixtral_1.txt
