# GPU call 5 (2026-11-27, session 40): the final code (GATE_UP GEMM1 tiles; the data file after calls 1, 2 and 4).
# The weight-only, swapped-tile and tuner GPU tests, then issue 13's bench: every weight-only scheme against bf16 Triton
# in the same run on both presets, and gpt-oss-20b mxfp4, every row checked against the reference.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; date -u +%H:%M:%S
T=plugins/triton_backend/tests
python3 -m pytest -q -p no:cacheprovider --collect-only $T/test_triton_weight_only.py $T/test_triton_swap_ab.py $T/test_triton_tune.py 2>/dev/null | grep "::" > /tmp/ids.txt
split -n r/4 /tmp/ids.txt /tmp/part_
for p in /tmp/part_*; do
  mapfile -t ids < $p
  timeout 170 python3 -m pytest -q -p no:cacheprovider "${ids[@]}" > $OUT/gpu_tests5_$(basename $p).txt 2>&1 &
done
wait; echo "tests $(wc -l < /tmp/ids.txt) after $(( $(date +%s) - s )) s"
tail -n 2 $OUT/gpu_tests5_*.txt | grep -E "passed|failed|error"; grep -h -E "^(FAILED|ERROR)" $OUT/gpu_tests5_*.txt | head -20
W="unquantized,w4a16,w4a16-zp,w8a16,w8a16-zp,fp8-w8a16,fp8-block-w8a16,nvfp4-w4a16,mxfp4"
date -u +%H:%M:%S; timeout 340 moe-core bench --quiet --backends triton --peers= --preset qwen3-30b-a3b,mixtral-8x7b --scheme $W \
  --tokens 1,16,64,4096 --reference-max-tokens 64 --json $OUT/wo5.json > $OUT/wo5.txt 2>&1; echo "wo rc=$? $(( $(date +%s) - s )) s"
date -u +%H:%M:%S; timeout $(( s + 585 - $(date +%s) )) moe-core bench --quiet --backends triton --peers= --preset gpt-oss-20b \
  --scheme unquantized,mxfp4 --tokens 1,16,64,4096 --reference-max-tokens 64 --json $OUT/gptoss5.json > $OUT/gptoss5.txt 2>&1
echo "gptoss rc=$? $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/wo5.txt | cut -c1-150; grep -v -i warn $OUT/gptoss5.txt | cut -c1-150
