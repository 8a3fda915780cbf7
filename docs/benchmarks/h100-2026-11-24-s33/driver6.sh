# GPU call 6 (2026-11-24, session 33), the experiment narrowed to w4a16-zp: its codes in fragment order too (int4 with
# or without zero points; fp8 back to K order and its entries back to HEAD's), its entries the refined ones of call 5,
# and a full search at 1 and 16 tokens on Mixtral-8x7B (call 5's refine from w4a16's tiles lost 6 to 16% there).
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
C=plugins/triton_backend/moe_core_triton/configs/nvidia_h100_80gb_hbm3.json
timeout 560 python3 -m moe_core_triton.tune --preset mixtral-8x7b --scheme w4a16-zp --tokens 1,16 2>&1 | grep -v -i "warn\|skip" >> $OUT/tune6.txt
echo "tune rc=$? $(( $(date +%s) - s )) s"; cp $C $OUT/configs_after_call6.json
cut -c1-330 $OUT/tune6.txt
