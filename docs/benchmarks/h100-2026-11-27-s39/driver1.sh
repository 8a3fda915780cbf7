# GPU call 1 (2026-11-27, session 39): nvfp4-w4a16 codes in fragment order and its e4m3 scales stored in the
# activations' dtype (WeightOnly.scales_in_dtype). The nvfp4 GPU tests; a full tile search of nvfp4 on both presets at
# 1, 16, 64 and 4096 tokens (its K-ordered entries were deleted from the data file); the in-process A/B against the
# plugin at HEAD before the change (.scratch/s39_old/moe_core_triton_old: K-ordered codes, e4m3 scale bytes, its tiles)
# with session 34's ab.py (.scratch/ is not committed: s39_old is `git archive 5d61d9f plugins/triton_backend/moe_core_triton`
# with every `moe_core_triton` renamed `moe_core_triton_old`); then a bench of bf16, nvfp4 and mxfp4 on both presets, each row checked against the reference.
cd "$(dirname "$0")/../../.."
s=$(date +%s); C=plugins/triton_backend/moe_core_triton/configs/nvidia_h100_80gb_hbm3.json
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
python3 -c "import torch, triton; print(torch.__version__, triton.__version__, torch.version.cuda)"; date -u +%H:%M:%S
T=plugins/triton_backend/tests
python3 -m pytest -q -p no:cacheprovider --collect-only $T -k "nvfp4" 2>/dev/null | grep "::" > /tmp/ids.txt
split -n r/4 /tmp/ids.txt /tmp/part_
for p in /tmp/part_*; do
  mapfile -t ids < $p
  timeout 150 python3 -m pytest -q -p no:cacheprovider "${ids[@]}" > $OUT/gpu_tests1_$(basename $p).txt 2>&1 &
done
wait; echo "tests $(wc -l < /tmp/ids.txt) after $(( $(date +%s) - s )) s"
tail -n 2 $OUT/gpu_tests1_*.txt | grep -E "passed|failed|error"; grep -h -E "^(FAILED|ERROR)" $OUT/gpu_tests1_*.txt | head -20
timeout $(( s + 400 - $(date +%s) )) python3 -m moe_core_triton.tune --jobs 16 --preset qwen3-30b-a3b,mixtral-8x7b \
  --scheme nvfp4-w4a16 --tokens 1,16,64,4096 2>&1 | grep -v -i "warn\|skip" > $OUT/tune_1.txt
echo "tune rc=${PIPESTATUS[0]} after $(( $(date +%s) - s )) s"; cp $C $OUT/configs_after_call1.json; cut -c1-300 $OUT/tune_1.txt | tail -20
PYTHONPATH=$PWD/.scratch/s39_old timeout $(( s + 500 - $(date +%s) )) python3 docs/benchmarks/h100-2026-11-25-s34/ab.py \
  schemes=unquantized,nvfp4-w4a16 tokens=1,16,64,4096 > $OUT/ab1.txt 2>&1
echo "ab rc=$? after $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/ab1.txt
date -u +%H:%M:%S; timeout $(( s + 585 - $(date +%s) )) moe-core bench --quiet --backends triton --peers= --preset qwen3-30b-a3b,mixtral-8x7b \
  --scheme unquantized,nvfp4-w4a16,mxfp4 --tokens 1,16,64,4096 --reference-max-tokens 64 --json $OUT/wo1.json > $OUT/wo1.txt 2>&1
echo "bench rc=$? after $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/wo1.txt | cut -c1-170
