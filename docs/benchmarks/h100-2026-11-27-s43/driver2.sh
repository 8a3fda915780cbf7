# GPU call 2 (2026-11-27, session 43): the final code and data file. Qwen3-30B-A3B's w4a16 at 4096 tokens on call 1's
# GEMM1 tile against 4febb82's tile (session 34's ab.py, 4febb82's plugin renamed moe_core_triton_old in
# .scratch/s43_old, not committed); then issue 13's bench: every weight-only scheme against bf16 Triton in the same run
# on Qwen3-30B-A3B and Mixtral-8x7B, every row checked against the reference.
cd "$(dirname "$0")/../../.."
s=$(date +%s); D=docs/benchmarks
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; date -u +%H:%M:%S
PYTHONPATH=$PWD/.scratch/s43_old timeout 100 python3 $D/h100-2026-11-25-s34/ab.py presets=qwen3-30b-a3b schemes=w4a16 \
  tokens=4096 > $OUT/ab2.txt 2>&1
echo "ab rc=$? after $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/ab2.txt
W="unquantized,w4a16,w4a16-zp,w8a16,w8a16-zp,fp8-w8a16,fp8-block-w8a16,nvfp4-w4a16,mxfp4"
timeout $(( s + 580 - $(date +%s) )) moe-core bench --quiet --backends triton --peers= --preset qwen3-30b-a3b,mixtral-8x7b \
  --scheme $W --tokens 1,16,64,4096 --reference-max-tokens 64 --json $OUT/wo2.json > $OUT/wo2.txt 2>&1
echo "wo rc=$? $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/wo2.txt | cut -c1-150
