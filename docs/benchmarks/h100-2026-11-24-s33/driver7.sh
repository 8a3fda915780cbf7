# GPU call 7 (2026-11-24, session 33): w4a16-zp in fragment order, full search at 1 token on Qwen3-30B-A3B (call 5's
# refine lost 16% there), then the A/B of w4a16-zp in one process against HEAD 21cf731 (.scratch/s33_head: K order,
# HEAD's tiles) at 1, 16, 64 and 4096 tokens on both presets, with the tiles of calls 5 to 7.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
C=plugins/triton_backend/moe_core_triton/configs/nvidia_h100_80gb_hbm3.json
D=docs/benchmarks/h100-2026-11-24-s33
timeout 300 python3 -m moe_core_triton.tune --preset qwen3-30b-a3b --scheme w4a16-zp --tokens 1 2>&1 | grep -v -i "warn\|skip" >> $OUT/tune7.txt
echo "tune rc=$? $(( $(date +%s) - s )) s"; cp $C $OUT/configs_after_call7.json
PYTHONPATH=$PWD/.scratch/s33_head timeout $(( 585 - ($(date +%s) - s) )) python3 $D/ab.py w4a16-zp > $OUT/ab7.txt 2>&1; echo "ab rc=$? $(( $(date +%s) - s )) s"
cut -c1-330 $OUT/tune7.txt; grep -v -i warn $OUT/ab7.txt
