cd "$(dirname "$0")/.."
s=$(date +%s)
timeout 530 bash benchmarks/tune_gpu.sh mixtral-8x7b:w4a16,w8a16:1,16,64 qwen3-30b-a3b:fp8-block-w8a16:1,16,64 > /dev/null 2>&1
echo "tune rc=$? $(( $(date +%s) - s )) s"
grep -v "^  skip" $OUT/tune.log | sed -e 's/LaunchConfig(BLOCK_M=\([0-9]*\), BLOCK_N=\([0-9]*\), BLOCK_K=\([0-9]*\), GROUP_M=[0-9]*, num_warps=\([0-9]\), num_stages=\([0-9]\), SWAP_AB=\([A-Za-z]*\), SPLIT_K=\([0-9]\), TMA_B=\([A-Za-z]*\))/\1x\2x\3 w\4 s\5 swap=\6 split=\7/g' -e 's/(fastest .*candidates in/(/'
