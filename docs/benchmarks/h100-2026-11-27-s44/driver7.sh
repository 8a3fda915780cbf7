# GPU call 7 (2026-11-27, session 44): as call 6 (mma_async_experiment.patch against the committed plugin) for every
# other layer at 4096 tokens: the remaining weight-only schemes, then bf16, fp8-block and fp8-channel (issue 12's).
cd "$(dirname "$0")/../../.."
s=$(date +%s); D=docs/benchmarks
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; date -u +%H:%M:%S
for args in "presets=qwen3-30b-a3b schemes=fp8-w8a16,fp8-block-w8a16 tokens=4096" \
            "presets=mixtral-8x7b,qwen3-30b-a3b schemes=w8a16-zp,nvfp4-w4a16,mxfp4,w4a16 tokens=4096" \
            "presets=qwen3-30b-a3b,mixtral-8x7b schemes=unquantized,fp8-block,fp8-channel tokens=4096"; do
  left=$(( s + 540 - $(date +%s) )); [ $left -lt 30 ] && break
  PYTHONPATH=$PWD/.scratch/s44_old timeout $left python3 $D/h100-2026-11-25-s34/ab.py $args >> $OUT/ab7.txt 2>&1
  echo "ab ($args) rc=$? after $(( $(date +%s) - s )) s"
done
grep -v -i warn $OUT/ab7.txt
