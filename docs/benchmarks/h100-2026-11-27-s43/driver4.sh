# GPU call 4 (2026-11-27, session 43): the mxfp4 tiles at 4096 tokens never searched on e2m1 words (session 41 ran out
# of device time): gpt-oss-20b's (0.75x of bf16 in call 3) and Mixtral-8x7B's; then the A/B at 4096 tokens against the
# data file of call 1 (the plugin as committed with that file, renamed moe_core_triton_old in .scratch/s43_old).
cd "$(dirname "$0")/../../.."
s=$(date +%s); D=docs/benchmarks; C=plugins/triton_backend/moe_core_triton/configs/nvidia_h100_80gb_hbm3.json
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; date -u +%H:%M:%S
timeout 420 python3 -m moe_core_triton.tune --jobs 16 --preset gpt-oss-20b,mixtral-8x7b --scheme mxfp4 --tokens 4096 2>&1 \
  | grep -v -i "warn\|skip" > $OUT/tune_4.txt
echo "tune rc=${PIPESTATUS[0]} after $(( $(date +%s) - s )) s"; cp $C $OUT/configs_after_call4.json; cut -c1-330 $OUT/tune_4.txt
PYTHONPATH=$PWD/.scratch/s43_old timeout $(( s + 580 - $(date +%s) )) python3 $D/h100-2026-11-25-s34/ab.py \
  presets=gpt-oss-20b,mixtral-8x7b schemes=mxfp4 tokens=4096 > $OUT/ab4.txt 2>&1
echo "ab rc=$? after $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/ab4.txt
