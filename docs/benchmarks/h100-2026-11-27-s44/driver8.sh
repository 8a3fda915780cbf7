# GPU call 8 (2026-11-27, session 44): MMA_IN_FLIGHT as a launch-config choice (gemm.py, configs.py), on in the H100
# data file's entries of the layers calls 1, 6 and 7 measured faster with it. (1) The A/B of those layers in one
# process against the committed plugin (.scratch/s44_old); (2) the GPU tests of the new test, the tuner and the
# split-K and compile-check files, in parallel parts.
cd "$(dirname "$0")/../../.."
s=$(date +%s); D=docs/benchmarks; T=plugins/triton_backend/tests
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; date -u +%H:%M:%S
for args in "presets=qwen3-30b-a3b schemes=w8a16,fp8-w8a16,fp8-block-w8a16,w8a16-zp,w4a16-zp tokens=4096" \
            "presets=mixtral-8x7b schemes=fp8-w8a16,fp8-block-w8a16,w8a16-zp,w4a16-zp tokens=4096" \
            "presets=mixtral-8x7b schemes=mxfp4 tokens=1" "presets=qwen3-30b-a3b schemes=mxfp4 tokens=1" \
            "presets=mixtral-8x7b,qwen3-30b-a3b schemes=nvfp4-w4a16 tokens=64" "presets=gpt-oss-20b schemes=mxfp4 tokens=64"; do
  left=$(( s + 330 - $(date +%s) )); [ $left -lt 20 ] && break
  PYTHONPATH=$PWD/.scratch/s44_old timeout $left python3 $D/h100-2026-11-25-s34/ab.py $args >> $OUT/ab8.txt 2>&1
  echo "ab ($args) rc=$? after $(( $(date +%s) - s )) s"
done
grep -v -i warn $OUT/ab8.txt | grep -v "^case"
python3 -m pytest -q -p no:cacheprovider --collect-only $T/test_triton_weight_only.py $T/test_triton_tune.py $T/test_triton_split_k.py \
  $T/test_triton_configs.py -k "mma_in_flight or tune or refine or split or config" 2>/dev/null | grep "::" > /tmp/ids.txt
split -n r/4 /tmp/ids.txt /tmp/part_
for p in /tmp/part_*; do
  mapfile -t ids < $p
  timeout $(( s + 560 - $(date +%s) )) python3 -m pytest -q -p no:cacheprovider "${ids[@]}" > $OUT/gpu_tests8_$(basename $p).txt 2>&1 &
done
wait; echo "tests $(wc -l < /tmp/ids.txt) after $(( $(date +%s) - s )) s"
tail -n 2 $OUT/gpu_tests8_*.txt | grep -E "passed|failed|error"; grep -h -E "^(FAILED|ERROR)" $OUT/gpu_tests8_*.txt | head -20
