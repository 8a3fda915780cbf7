# GPU call 3 (2026-11-26, session 38): GEMM2's A rows in order through pointers (rows-*) against gathered rows and
# TMA (ws_probe.py; GEMM2 shapes of Qwen3 and Mixtral at 4096 tokens, DeepSeek-V3 at 16384; one program per tile).
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
P="python3 docs/benchmarks/h100-2026-11-26-s38/ws_probe.py --gemms 2 --configs 1,3 --modes grid --plugin-schemes= --layouts tma-scatter,rows-scatter,gather-scatter,rows-tma"
for p in qwen3-30b-a3b:4096 mixtral-8x7b:4096 deepseek-v3:16384; do
  timeout 150 $P --preset ${p%%:*} --tokens ${p##*:} 2>&1 | grep -v -i warn > $OUT/rows_${p%%:*}_3.txt; echo "$p rc=$? $(( $(date +%s) - s )) s"
done
grep -h -E "^==|best" $OUT/rows_*_3.txt
