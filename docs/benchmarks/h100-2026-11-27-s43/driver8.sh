# GPU call 8 (2026-11-27, session 43): weight-only decode tiles whose K step spans two scale groups run one group a
# step, two steps an iteration of the K loop, each group's product scaled (TritonKernel.k_steps, gemm.py UNROLL). The
# GPU tests of the weight-only int and fp8 schemes, int4 words and the tuner in four parallel parts; the A/B against
# 600e7b6's plugin (.scratch/s43_old, not committed) at 1 to 64 tokens; the bench of the schemes it touches.
cd "$(dirname "$0")/../../.."
s=$(date +%s); D=docs/benchmarks; T=plugins/triton_backend/tests
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; date -u +%H:%M:%S
python3 -m pytest -q -p no:cacheprovider --collect-only $T/test_triton_weight_only.py $T/test_triton_int4_words.py \
  $T/test_triton_tune.py -k "two_groups or tile_product or int4 or w4a16 or w8a16 or fp8 or tune or k_order" 2>/dev/null \
  | grep "::" > /tmp/ids.txt
split -n r/4 /tmp/ids.txt /tmp/part_
for p in /tmp/part_*; do
  mapfile -t ids < $p
  timeout 200 python3 -m pytest -q -p no:cacheprovider "${ids[@]}" > $OUT/gpu_tests8_$(basename $p).txt 2>&1 &
done
wait; echo "tests $(wc -l < /tmp/ids.txt) after $(( $(date +%s) - s )) s"
tail -n 2 $OUT/gpu_tests8_*.txt | grep -E "passed|failed|error"; grep -h -E "^(FAILED|ERROR)" $OUT/gpu_tests8_*.txt | head -20
PYTHONPATH=$PWD/.scratch/s43_old timeout 170 python3 $D/h100-2026-11-25-s34/ab.py presets=mixtral-8x7b,qwen3-30b-a3b \
  schemes=w4a16,w8a16,w8a16-zp,fp8-block-w8a16 tokens=16,1,64 > $OUT/ab8.txt 2>&1
echo "ab rc=$? after $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/ab8.txt
timeout $(( s + 585 - $(date +%s) )) moe-core bench --quiet --backends triton --peers= --preset mixtral-8x7b,qwen3-30b-a3b \
  --scheme unquantized,w4a16,w8a16,w8a16-zp --tokens 1,16,64 --reference-max-tokens 64 --json $OUT/wo8.json > $OUT/wo8.txt 2>&1
echo "wo rc=$? $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/wo8.txt | cut -c1-150
