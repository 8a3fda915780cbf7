# GPU call 3 (2026-11-24, session 32): the remaining fp4 decode tiles refined (tune --refine: the entry, one stage more,
# twice the columns, twice the rows). configs_seeded.json is the file they start from: call 2's full searches plus
# seeds copied from them (Qwen3 nvfp4 16/64 from its 1-token entries, split-K off; Mixtral mxfp4 16/64 from the 16-token
# GEMM1 search and the 1-token GEMM2 entry, split-K off; Mixtral nvfp4 from Mixtral mxfp4). Then moe-core bench of every
# weight-only scheme against bf16 at 1, 16, 64 and 4096 tokens (Qwen3-30B-A3B, Mixtral-8x7B; gpt-oss-20b mxfp4).
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
(timeout 150 python3 -m moe_core_triton.tune --refine --preset mixtral-8x7b --scheme mxfp4 --tokens 16,64
 timeout 150 python3 -m moe_core_triton.tune --refine --preset qwen3-30b-a3b --scheme nvfp4-w4a16 --tokens 16,64
 timeout 200 python3 -m moe_core_triton.tune --refine --preset mixtral-8x7b --scheme nvfp4-w4a16 --tokens 1,16,64) > $OUT/tune_refine.txt 2>&1
echo "refine $(( $(date +%s) - s )) s"; grep -v -i "warn\|skip" $OUT/tune_refine.txt | cut -c1-260
cp plugins/triton_backend/moe_core_triton/configs/nvidia_h100_80gb_hbm3.json $OUT/configs_after_call3.json
W="unquantized,w4a16,w4a16-zp,w8a16,w8a16-zp,fp8-w8a16,fp8-block-w8a16,nvfp4-w4a16,mxfp4"
date -u +%H:%M:%S; timeout $(( 520 - ($(date +%s) - s) )) moe-core bench --quiet --backends triton --peers= --preset qwen3-30b-a3b,mixtral-8x7b --scheme $W --tokens 1,16,64,4096 --reference-max-tokens 64 --json $OUT/wo.json > $OUT/wo.txt 2>&1; echo "wo rc=$? $(( $(date +%s) - s )) s"
date -u +%H:%M:%S; timeout $(( 590 - ($(date +%s) - s) )) moe-core bench --quiet --backends triton --peers= --preset gpt-oss-20b --scheme unquantized,mxfp4 --tokens 1,16,64,4096 --reference-max-tokens 64 --json $OUT/gptoss.json > $OUT/gptoss.txt 2>&1; echo "gptoss rc=$? $(( $(date +%s) - s )) s"
grep -v -i warn $OUT/wo.txt | head -60; grep -v -i warn $OUT/gptoss.txt | head -20
