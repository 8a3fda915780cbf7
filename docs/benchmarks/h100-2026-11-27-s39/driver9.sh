# GPU call 9 (2026-11-27, session 39; tried and reverted, see weight-only-h100.md): mxfp4's e8m0 scales stored as bfloat16 values in bfloat16 layers
# (WeightOnly.scales_in_dtype). The mxfp4 GPU tests (bf16 and fp16), then the in-process A/B against 7abcf02's plugin
# (.scratch/s39_head: `git archive 7abcf02 plugins/triton_backend/moe_core_triton`, every `moe_core_triton` renamed
# `moe_core_triton_old`; not committed) with session 34's ab.py, on the three presets.
cd "$(dirname "$0")/../../.."
s=$(date +%s); D=docs/benchmarks/h100-2026-11-27-s39
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; date -u +%H:%M:%S
T=plugins/triton_backend/tests
python3 -m pytest -q -p no:cacheprovider --collect-only $T/test_triton_weight_only.py -k "mxfp4 or e2m1 or stored_as_exact" 2>/dev/null | grep "::" > /tmp/ids.txt
split -n r/4 /tmp/ids.txt /tmp/part_
for p in /tmp/part_*; do
  mapfile -t ids < $p
  timeout 120 python3 -m pytest -q -p no:cacheprovider "${ids[@]}" > $OUT/gpu_tests9_$(basename $p).txt 2>&1 &
done
wait; echo "tests $(wc -l < /tmp/ids.txt) after $(( $(date +%s) - s )) s"
tail -n 2 $OUT/gpu_tests9_*.txt | grep -E "passed|failed|error"; grep -h -E "^(FAILED|ERROR)" $OUT/gpu_tests9_*.txt | head -20
PYTHONPATH=$PWD/.scratch/s39_head timeout $(( s + 400 - $(date +%s) )) python3 $D/../h100-2026-11-25-s34/ab.py \
  presets=qwen3-30b-a3b,mixtral-8x7b,gpt-oss-20b schemes=unquantized,mxfp4 tokens=1,16,64,4096 > $OUT/ab9.txt 2>&1
echo "ab rc=$? after $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/ab9.txt
