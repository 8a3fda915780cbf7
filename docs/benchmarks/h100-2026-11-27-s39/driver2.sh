# GPU call 2 (2026-11-27, session 39): the nvfp4 searches call 1 ran out of time for (Mixtral at 64 and 4096 tokens);
# the A/B against the old plugin for those cells; the bench of bf16, nvfp4 and mxfp4 on both presets with the final
# tiles (every row checked against the reference); and eager_pairs.py (issue 12: how far 5 paired batches pin
# eager - graph b2b for multi-millisecond layers).
cd "$(dirname "$0")/../../.."
s=$(date +%s); C=plugins/triton_backend/moe_core_triton/configs/nvidia_h100_80gb_hbm3.json; D=docs/benchmarks/h100-2026-11-27-s39
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; date -u +%H:%M:%S
timeout 260 python3 -m moe_core_triton.tune --jobs 16 --preset mixtral-8x7b --scheme nvfp4-w4a16 --tokens 64,4096 2>&1 \
  | grep -v -i "warn\|skip" > $OUT/tune_2.txt
echo "tune rc=${PIPESTATUS[0]} after $(( $(date +%s) - s )) s"; cp $C $OUT/configs_after_call2.json; cut -c1-300 $OUT/tune_2.txt | tail -6
PYTHONPATH=$PWD/.scratch/s39_old timeout 100 python3 $D/../h100-2026-11-25-s34/ab.py presets=mixtral-8x7b \
  schemes=unquantized,nvfp4-w4a16 tokens=64,4096 > $OUT/ab2.txt 2>&1
echo "ab rc=$? after $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/ab2.txt
date -u +%H:%M:%S; timeout 120 moe-core bench --quiet --backends triton --peers= --preset qwen3-30b-a3b,mixtral-8x7b \
  --scheme unquantized,nvfp4-w4a16,mxfp4 --tokens 1,16,64,4096 --reference-max-tokens 64 --json $OUT/wo2.json > $OUT/wo2.txt 2>&1
echo "bench rc=$? after $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/wo2.txt | cut -c1-150
timeout $(( s + 585 - $(date +%s) )) python3 $D/eager_pairs.py > $OUT/eager_pairs2.txt 2>&1
echo "pairs rc=$? after $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/eager_pairs2.txt
