# GPU call 6 (2026-11-27, session 41): the final code and data file (e2m1 words; fp4 decode tiles searched again in calls
# 4 and 5). Issue 13's bench: every weight-only scheme against bf16 Triton in the same run on both presets, and
# gpt-oss-20b mxfp4, every row checked against the reference; then call 2's A/B at 1 to 64 tokens on the new tiles.
cd "$(dirname "$0")/../../.."
s=$(date +%s); D=docs/benchmarks
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; date -u +%H:%M:%S
W="unquantized,w4a16,w4a16-zp,w8a16,w8a16-zp,fp8-w8a16,fp8-block-w8a16,nvfp4-w4a16,mxfp4"
timeout 330 moe-core bench --quiet --backends triton --peers= --preset qwen3-30b-a3b,mixtral-8x7b --scheme $W \
  --tokens 1,16,64,4096 --reference-max-tokens 64 --json $OUT/wo6.json > $OUT/wo6.txt 2>&1; echo "wo rc=$? $(( $(date +%s) - s )) s"
timeout $(( s + 470 - $(date +%s) )) moe-core bench --quiet --backends triton --peers= --preset gpt-oss-20b \
  --scheme unquantized,mxfp4 --tokens 1,16,64,4096 --reference-max-tokens 64 --json $OUT/gptoss6.json > $OUT/gptoss6.txt 2>&1
echo "gptoss rc=$? $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/wo6.txt | cut -c1-150; grep -v -i warn $OUT/gptoss6.txt | cut -c1-150
PYTHONPATH=$PWD/.scratch/s41_old timeout $(( s + 590 - $(date +%s) )) python3 $D/h100-2026-11-25-s34/ab.py \
  presets=mixtral-8x7b,qwen3-30b-a3b,gpt-oss-20b schemes=nvfp4-w4a16,mxfp4 tokens=16,1,64 > $OUT/ab6.txt 2>&1
echo "ab rc=$? after $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/ab6.txt
