cd "$(dirname "$0")/.."
s=$(date +%s)
TUNE_ARGS=--refine timeout 520 bash benchmarks/tune_gpu.sh qwen3-30b-a3b:fp8-block,fp8-channel,unquantized:1024,4096 deepseek-v3:fp8-block:4096 mixtral-8x7b:fp8-block,unquantized:4096 > $OUT/tune_stdout.txt 2>&1
echo "tune rc=$? $(( $(date +%s) - s )) s"
grep -v "^  skip" $OUT/tune.log | grep " with " | cut -c1-300
