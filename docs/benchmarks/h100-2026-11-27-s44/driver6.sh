# GPU call 6 (2026-11-27, session 44): mma_async_experiment.patch applied (as in call 1) against the committed plugin
# (.scratch/s44_old), at 4096 tokens: Mixtral-8x7B's fp8-w8a16 and fp8-block-w8a16 layers, whose GEMMs the CPU
# machine's compile found serialized at that size (survey_cpu_committed.txt), and four layers whose 4096-token GEMMs
# it did not, as controls.
cd "$(dirname "$0")/../../.."
s=$(date +%s); D=docs/benchmarks
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; date -u +%H:%M:%S
for args in "presets=mixtral-8x7b schemes=fp8-w8a16,fp8-block-w8a16 tokens=4096" \
            "presets=mixtral-8x7b,qwen3-30b-a3b schemes=w8a16,w4a16-zp tokens=4096"; do
  left=$(( s + 400 - $(date +%s) )); [ $left -lt 30 ] && break
  PYTHONPATH=$PWD/.scratch/s44_old timeout $left python3 $D/h100-2026-11-25-s34/ab.py $args >> $OUT/ab6.txt 2>&1
  echo "ab ($args) rc=$? after $(( $(date +%s) - s )) s"
done
grep -v -i warn $OUT/ab6.txt
