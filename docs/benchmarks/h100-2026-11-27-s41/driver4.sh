# GPU call 4 (2026-11-27, session 41): e2m1 words decoded by PTX only in Hopper's swapped warpgroup tiles (words_by_ptx),
# by integer operations elsewhere: the words tests, the fp4 weight-only and tuner tests, then the decode tiles of nvfp4
# and mxfp4 searched again on words, Qwen3-30B-A3B and Mixtral-8x7B at 1, 16 and 64 tokens.
cd "$(dirname "$0")/../../.."
s=$(date +%s); C=plugins/triton_backend/moe_core_triton/configs/nvidia_h100_80gb_hbm3.json; T=plugins/triton_backend/tests
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; date -u +%H:%M:%S
timeout 170 python3 -m pytest -q -p no:cacheprovider $T/test_triton_e2m1_words.py $T/test_triton_tune.py \
  $T/test_triton_weight_only.py -k "words or e2m1 or nvfp4 or mxfp4" > $OUT/gpu_tests4.txt 2>&1
echo "tests rc=$? after $(( $(date +%s) - s )) s"; grep -E "^(FAILED|ERROR)|passed|failed" $OUT/gpu_tests4.txt | tail -12
timeout $(( s + 585 - $(date +%s) )) python3 -m moe_core_triton.tune --jobs 16 --preset qwen3-30b-a3b,mixtral-8x7b \
  --scheme nvfp4-w4a16,mxfp4 --tokens 1,16,64 2>&1 | grep -v -i "warn\|skip" > $OUT/tune_4.txt
echo "tune rc=${PIPESTATUS[0]} after $(( $(date +%s) - s )) s"; cp $C $OUT/configs_after_call4.json; cut -c1-330 $OUT/tune_4.txt | tail -20
