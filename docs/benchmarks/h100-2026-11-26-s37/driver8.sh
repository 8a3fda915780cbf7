# GPU call 8 (2026-11-26, session 37): the one-launch layer for gpt-oss-20b's shape in bf16 (E=32, k=4, H=I=2880):
# tune --fused at 1, 2 and 4 tokens (writes the data file's gemm=fused entries); fused_ab.py against the two GEMMs in
# one process; moe-core bench against torch._grouped_mm at 1 to 8 tokens.
cd "$(dirname "$0")/../../.."
s=$(date +%s); E=docs/benchmarks/h100-2026-11-26-s37
C=plugins/triton_backend/moe_core_triton/configs/nvidia_h100_80gb_hbm3.json
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
timeout 300 python3 -m moe_core_triton.tune --fused --jobs 3 --preset gpt-oss-20b --scheme unquantized --tokens 1,2,4 2>&1 | grep -v -i "warn\|skip" > $OUT/tune_fused8.txt
echo "tune $(( $(date +%s) - s )) s"; cat $OUT/tune_fused8.txt; cp $C $OUT/configs_after_call8.json
timeout $(( s + 420 - $(date +%s) )) python3 $E/fused_ab.py gpt-oss-20b:1,2,4 2>&1 | grep -v -i warn > $OUT/fused_ab8.txt
echo "ab rc=${PIPESTATUS[0]} $(( $(date +%s) - s )) s"; cat $OUT/fused_ab8.txt
timeout $(( s + 580 - $(date +%s) )) moe-core bench --quiet --backends triton --peers torch_grouped_mm --preset gpt-oss-20b --scheme unquantized --tokens 1,2,4,8 --reference-max-tokens 64 --json $OUT/bench8.json > $OUT/bench8.txt 2>&1
echo "bench rc=$? $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/bench8.txt | head -20
