# GPU call 3 (2026-11-25, session 34): nvfp4-w4a16 searched in full on codes in fragment order (swapped tiles only) on
# both presets; Mixtral fp8-block-w8a16 refined from fp8-w8a16's new tiles (copied into its entries before the call);
# then the A/B against 3c62fb6 (.scratch/s34_head) of the schemes now in fragment order, as far as the call's time allows.
cd "$(dirname "$0")/../../.."
s=$(date +%s); D=docs/benchmarks/h100-2026-11-25-s34
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
bash $D/search.sh 3 $(( s + 330 )) 1,16,64,4096 qwen3-30b-a3b:nvfp4-w4a16 mixtral-8x7b:nvfp4-w4a16
timeout $(( 380 - ($(date +%s) - s) )) python3 -m moe_core_triton.tune --refine --preset mixtral-8x7b --scheme fp8-block-w8a16 \
  --tokens 1,16,64,4096 2>&1 | grep -v -i "warn\|skip" >> $OUT/tune_3.txt
echo "refine rc=${PIPESTATUS[0]} $(( $(date +%s) - s )) s"
cp plugins/triton_backend/moe_core_triton/configs/nvidia_h100_80gb_hbm3.json $OUT/configs_after_3.json
PYTHONPATH=$PWD/.scratch/s34_head timeout $(( 590 - ($(date +%s) - s) )) python3 $D/ab.py schemes=fp8-w8a16,mxfp4,nvfp4-w4a16 \
  tokens=4096,1,16,64 > $OUT/ab3.txt 2>&1
echo "ab rc=$? $(( $(date +%s) - s )) s"
cut -c1-300 $OUT/tune_3.txt; grep -v -i warn $OUT/ab3.txt
