cd "$(dirname "$0")/.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend > /dev/null 2>&1
W="w4a16,w4a16-zp,w8a16,w8a16-zp,fp8-w8a16,fp8-block-w8a16,nvfp4-w4a16,mxfp4"
for p in qwen3-30b-a3b mixtral-8x7b; do
  timeout 230 moe-core bench --quiet --backends triton,reference --peers= --preset $p --scheme $W --tokens 1,16,64,256,1024 --input-sets 2 \
     --json $OUT/wo_rank_$p.json --write-ranking $OUT/ranking_wo_$p.json > $OUT/wo_rank_$p.txt 2>&1
  echo "$p rc=$? $(( $(date +%s) - s )) s"
done
grep -c " ok " $OUT/wo_rank_*.txt; grep -E "failed|error" $OUT/wo_rank_*.txt | head
