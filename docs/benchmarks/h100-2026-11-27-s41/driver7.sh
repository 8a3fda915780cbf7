# GPU call 7 (2026-11-27, session 41): the 4096-token tiles of nvfp4 and mxfp4 searched again on e2m1 words (Qwen3-30B-A3B,
# Mixtral-8x7B, gpt-oss-20b's mxfp4), then the A/B at 4096 tokens against 2af6fa2's plugin and data file (session 34's
# ab.py, the old plugin in .scratch/s41_old, not committed).
cd "$(dirname "$0")/../../.."
s=$(date +%s); D=docs/benchmarks; C=plugins/triton_backend/moe_core_triton/configs/nvidia_h100_80gb_hbm3.json
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; date -u +%H:%M:%S
timeout 330 python3 -m moe_core_triton.tune --jobs 16 --preset qwen3-30b-a3b,mixtral-8x7b --scheme nvfp4-w4a16,mxfp4 \
  --tokens 4096 2>&1 | grep -v -i "warn\|skip" > $OUT/tune_7.txt
echo "tune rc=${PIPESTATUS[0]} after $(( $(date +%s) - s )) s"
timeout $(( s + 430 - $(date +%s) )) python3 -m moe_core_triton.tune --jobs 16 --preset gpt-oss-20b --scheme mxfp4 --tokens 4096 2>&1 \
  | grep -v -i "warn\|skip" >> $OUT/tune_7.txt
echo "tune rc=${PIPESTATUS[0]} after $(( $(date +%s) - s )) s"; cp $C $OUT/configs_after_call7.json; cut -c1-250 $OUT/tune_7.txt | grep GEMM
PYTHONPATH=$PWD/.scratch/s41_old timeout $(( s + 590 - $(date +%s) )) python3 $D/h100-2026-11-25-s34/ab.py \
  presets=mixtral-8x7b,qwen3-30b-a3b,gpt-oss-20b schemes=mxfp4,nvfp4-w4a16 tokens=4096 > $OUT/ab7.txt 2>&1
echo "ab rc=$? after $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/ab7.txt
