# GPU call 7 (2026-11-25, session 35): the data file with the probe's (deep_decode_probe.py, call 6) K-256 decode tiles.
# The weight-only bench of both presets, every row checked against the reference, each scheme against bf16 Triton in
# the same run; then the A/B of the changed cells against the plugin before them (.scratch/s35_mid, acdac59).
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
W="unquantized,w4a16,w4a16-zp,w8a16,w8a16-zp,fp8-w8a16,fp8-block-w8a16,nvfp4-w4a16,mxfp4"
date -u +%H:%M:%S; timeout 330 moe-core bench --quiet --backends triton --peers= --preset qwen3-30b-a3b,mixtral-8x7b --scheme $W --tokens 1,16,64,4096 --reference-max-tokens 64 --json $OUT/wo7.json > $OUT/wo7.txt 2>&1; echo "wo rc=$? $(( $(date +%s) - s )) s"
PYTHONPATH=$PWD/.scratch/s35_mid timeout $(( 590 - ($(date +%s) - s) )) python3 docs/benchmarks/h100-2026-11-25-s34/ab.py schemes=unquantized,w4a16,w8a16,fp8-w8a16 tokens=1,16 > $OUT/ab7.txt 2>&1
echo "ab rc=$? $(( $(date +%s) - s )) s"
grep -v -i warn $OUT/wo7.txt | cut -c1-120; grep -v -i warn $OUT/ab7.txt
