cd "$(dirname "$0")/.."
export TUNE_ARGS=--refine
timeout 570 bash benchmarks/tune_gpu.sh mixtral-8x7b:unquantized,fp8-block:4096,16384 qwen3-30b-a3b:unquantized,fp8-block:1024,4096,16384 \
  deepseek-v3:fp8-block:4096,16384 qwen3-30b-a3b:fp8-channel:4096 mixtral-8x7b:fp8-channel:4096 > /dev/null 2>&1
grep -v "^  skip" $OUT/tune.log | sed 's/LaunchConfig(BLOCK_M=\([0-9]*\), BLOCK_N=\([0-9]*\), BLOCK_K=\([0-9]*\), GROUP_M=[0-9]*, num_warps=\([0-9]\), num_stages=\([0-9]\), SWAP_AB=False, SPLIT_K=1, TMA_B=\([A-Za-z]*\))/\1x\2x\3 w\4 s\5 tma=\6/g'
