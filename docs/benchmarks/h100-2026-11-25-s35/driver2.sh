# GPU call 2 (2026-11-25, session 35): full swapped-only tile searches the last session could not run.
# (a) 4096 tokens with the 256-row candidates (tune.candidates: beyond 128 rows per expert on permuted codes) for
#     every scheme whose codes are permuted and whose 4096 entry came from a search without them: w4a16, w4a16-zp,
#     fp8-w8a16, fp8-block-w8a16, mxfp4 on both presets (Mixtral w4a16 and mxfp4 GEMM2 had hand-set 256-row entries).
# (b) Qwen3 w4a16 and w4a16-zp at 1 token (the w4a16 GEMM1 entry was an unswapped tile on permuted codes), compiled
#     beside (a)'s compile phase and timed after it.
cd "$(dirname "$0")/../../.."
s=$(date +%s); C=plugins/triton_backend/moe_core_triton/configs/nvidia_h100_80gb_hbm3.json
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
for name in w4a16 w4a16-zp; do
  OMP_NUM_THREADS=1 python3 -m moe_core_triton.tune --compile-only --preset qwen3-30b-a3b --scheme $name --tokens 1 > /dev/null 2>&1 &
done
timeout $(( s + 520 - $(date +%s) )) python3 -m moe_core_triton.tune --jobs 14 --preset qwen3-30b-a3b,mixtral-8x7b \
  --scheme w4a16,w4a16-zp,fp8-w8a16,fp8-block-w8a16,mxfp4 --tokens 4096 2>&1 | grep -v -i "warn\|skip" > $OUT/tune_2.txt
echo "4096: rc=${PIPESTATUS[0]} after $(( $(date +%s) - s )) s"
wait
timeout $(( s + 580 - $(date +%s) )) python3 -m moe_core_triton.tune --preset qwen3-30b-a3b --scheme w4a16,w4a16-zp --tokens 1 2>&1 \
  | grep -v -i "warn\|skip" >> $OUT/tune_2.txt
echo "1 token: rc=${PIPESTATUS[0]} after $(( $(date +%s) - s )) s"
cp $C $OUT/configs_after_call2.json
cut -c1-330 $OUT/tune_2.txt
