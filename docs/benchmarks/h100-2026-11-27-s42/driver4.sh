# GPU call 4 (2026-11-27, session 42): Mixtral-8x7B's w4a16 and w4a16-zp tiles at 4096 tokens searched again on int4
# words (call 3: 4.1 and 8.9% slower there than on bytes), then the A/B at 4096 tokens against 1bccf07 on the new file.
cd "$(dirname "$0")/../../.."
s=$(date +%s); D=docs/benchmarks; C=plugins/triton_backend/moe_core_triton/configs/nvidia_h100_80gb_hbm3.json
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; date -u +%H:%M:%S
timeout 370 python3 -m moe_core_triton.tune --jobs 16 --preset mixtral-8x7b --scheme w4a16-zp,w4a16 --tokens 4096 2>&1 \
  | grep -v -i "warn\|skip" > $OUT/tune_4.txt
echo "tune rc=${PIPESTATUS[0]} after $(( $(date +%s) - s )) s"; cp $C $OUT/configs_after_call4.json; cut -c1-330 $OUT/tune_4.txt
PYTHONPATH=$PWD/.scratch/s42 timeout $(( s + 465 - $(date +%s) )) python3 $D/h100-2026-11-25-s34/ab.py \
  presets=mixtral-8x7b schemes=w4a16-zp,w4a16 tokens=4096 > $OUT/ab4.txt 2>&1
echo "ab rc=$? after $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/ab4.txt
