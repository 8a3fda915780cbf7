# GPU call 10 (2026-11-27, session 43): decode tiles searched again with GROUP_STEPS among the candidates, for the
# group-128 schemes whose entries step 128 deep: w4a16-zp and w8a16-zp on both presets, w8a16 on Qwen3-30B-A3B, at 16
# and 64 tokens; then the A/B against 55090c5's plugin and data file (.scratch/s43_old, not committed).
cd "$(dirname "$0")/../../.."
s=$(date +%s); D=docs/benchmarks; C=plugins/triton_backend/moe_core_triton/configs/nvidia_h100_80gb_hbm3.json
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; date -u +%H:%M:%S
for c in qwen3-30b-a3b:w4a16-zp,w8a16-zp,w8a16 mixtral-8x7b:w4a16-zp,w8a16-zp; do
  timeout $(( s + 420 - $(date +%s) )) python3 -m moe_core_triton.tune --jobs 16 --preset ${c%%:*} --scheme ${c##*:} \
    --tokens 16,64 2>&1 | grep -v -i "warn\|skip" >> $OUT/tune_10.txt
  echo "tune $c rc=${PIPESTATUS[0]} after $(( $(date +%s) - s )) s"
done
cp $C $OUT/configs_after_call10.json; cut -c1-330 $OUT/tune_10.txt
PYTHONPATH=$PWD/.scratch/s43_old timeout $(( s + 585 - $(date +%s) )) python3 $D/h100-2026-11-25-s34/ab.py \
  presets=qwen3-30b-a3b,mixtral-8x7b schemes=w4a16-zp,w8a16-zp,w8a16 tokens=16,64 > $OUT/ab10.txt 2>&1
echo "ab rc=$? after $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/ab10.txt
