# GPU call 3 (2026-11-27, session 40): the data file after calls 1 and 2 (GATE_UP GEMM1 tiles at 4096 tokens) against
# 83b4513's plugin and data file in one process (session 34's ab.py; the old plugin renamed moe_core_triton_old in
# .scratch/s40_old, not committed), then issue 13's bench at 4096 tokens on Mixtral-8x7B and gpt-oss-20b.
cd "$(dirname "$0")/../../.."
s=$(date +%s); D=docs/benchmarks
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; date -u +%H:%M:%S
W=w4a16,w4a16-zp,w8a16,w8a16-zp,fp8-w8a16,fp8-block-w8a16,nvfp4-w4a16,mxfp4
PYTHONPATH=$PWD/.scratch/s40_old timeout 200 python3 $D/h100-2026-11-25-s34/ab.py presets=mixtral-8x7b schemes=unquantized,$W tokens=4096 > $OUT/ab3.txt 2>&1
echo "ab rc=$? after $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/ab3.txt
PYTHONPATH=$PWD/.scratch/s40_old timeout 60 python3 $D/h100-2026-11-25-s34/ab.py presets=gpt-oss-20b schemes=unquantized,mxfp4 tokens=4096 > $OUT/ab3b.txt 2>&1
echo "ab rc=$? after $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/ab3b.txt
date -u +%H:%M:%S; timeout $(( s + 480 - $(date +%s) )) moe-core bench --quiet --backends triton --peers= --preset mixtral-8x7b \
  --scheme unquantized,$W --tokens 4096 --reference-max-tokens 64 --json $OUT/wo3.json > $OUT/wo3.txt 2>&1
echo "bench rc=$? after $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/wo3.txt | cut -c1-170
timeout $(( s + 590 - $(date +%s) )) moe-core bench --quiet --backends triton --peers= --preset gpt-oss-20b \
  --scheme unquantized,mxfp4 --tokens 4096 --reference-max-tokens 64 --json $OUT/gptoss3.json > $OUT/gptoss3.txt 2>&1
echo "bench rc=$? after $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/gptoss3.txt | cut -c1-170
