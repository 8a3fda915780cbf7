# GPU call 6 (2026-11-27, session 43): w4a16's decode tiles searched again with three deeper-pipeline candidates added
# (deeper_stages.py): Mixtral-8x7B at 16 tokens (74.9% of the roofline in call 2; the target is 75%), then at 1 and 64,
# and Qwen3-30B-A3B at 16 and 64; then the A/B against 2f6d8ec's data file (its plugin renamed moe_core_triton_old in
# .scratch/s43_old, not committed).
cd "$(dirname "$0")/../../.."
s=$(date +%s); D=docs/benchmarks; C=plugins/triton_backend/moe_core_triton/configs/nvidia_h100_80gb_hbm3.json
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; date -u +%H:%M:%S
for c in mixtral-8x7b:16 mixtral-8x7b:1,64 qwen3-30b-a3b:16,64; do
  timeout $(( s + 470 - $(date +%s) )) python3 $D/h100-2026-11-27-s43/deeper_stages.py --jobs 16 --preset ${c%%:*} --scheme w4a16 \
    --tokens ${c##*:} 2>&1 | grep -v -i "warn\|skip" >> $OUT/tune_6.txt
  echo "tune $c rc=${PIPESTATUS[0]} after $(( $(date +%s) - s )) s"
done
cp $C $OUT/configs_after_call6.json; cut -c1-330 $OUT/tune_6.txt
PYTHONPATH=$PWD/.scratch/s43_old timeout $(( s + 585 - $(date +%s) )) python3 $D/h100-2026-11-25-s34/ab.py \
  presets=mixtral-8x7b,qwen3-30b-a3b schemes=w4a16 tokens=16,1,64 > $OUT/ab6.txt 2>&1
echo "ab rc=$? after $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/ab6.txt
