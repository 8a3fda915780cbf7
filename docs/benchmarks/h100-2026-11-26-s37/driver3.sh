# GPU call 3 (2026-11-26, session 37): fused_sweep.py --write (Qwen3-30B-A3B bf16 at 1 and 2 tokens, 228 one-launch
# candidates each, written to the data file where they beat the two GEMMs by 3%); fused_ab.py with that file; issue 12's
# bench at decode sizes (triton against torch._grouped_mm and the roofline, both presets).
cd "$(dirname "$0")/../../.."
s=$(date +%s); E=docs/benchmarks/h100-2026-11-26-s37
C=plugins/triton_backend/moe_core_triton/configs/nvidia_h100_80gb_hbm3.json
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
timeout 330 python3 $E/fused_sweep.py --write 1,2 2>&1 | grep -v -i warn > $OUT/fused_sweep3.txt
echo "sweep rc=${PIPESTATUS[0]} $(( $(date +%s) - s )) s"; cat $OUT/fused_sweep3.txt; cp $C $OUT/configs_after_call3.json
timeout $(( s + 420 - $(date +%s) )) python3 $E/fused_ab.py qwen3-30b-a3b:1,2,4,8 2>&1 | grep -v -i warn > $OUT/fused_ab3.txt
echo "ab rc=${PIPESTATUS[0]} $(( $(date +%s) - s )) s"; cat $OUT/fused_ab3.txt
timeout $(( s + 585 - $(date +%s) )) moe-core bench --quiet --backends triton --peers torch_grouped_mm --preset qwen3-30b-a3b,mixtral-8x7b --scheme unquantized --tokens 1,2,4,8,16 --reference-max-tokens 64 --json $OUT/bench3.json > $OUT/bench3.txt 2>&1
echo "bench rc=$? $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/bench3.txt | head -60
