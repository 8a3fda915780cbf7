# GPU call 3 (2026-11-25, session 35): the final tiles. The weight-only bench of both presets and of gpt-oss-20b,
# every row checked against the reference, each scheme against bf16 Triton in the same run; then the A/B of w8a16 and
# w8a16-zp against the plugin at 9803538 (.scratch/s35_old: their codes in K order, uint8 w8a16-zp codes, its
# tiles) with session 34's ab.py, unchanged.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
python3 -c "import torch, triton; print(torch.__version__, triton.__version__, torch.version.cuda)"
W="unquantized,w4a16,w4a16-zp,w8a16,w8a16-zp,fp8-w8a16,fp8-block-w8a16,nvfp4-w4a16,mxfp4"
date -u +%H:%M:%S; timeout 330 moe-core bench --quiet --backends triton --peers= --preset qwen3-30b-a3b,mixtral-8x7b --scheme $W --tokens 1,16,64,4096 --reference-max-tokens 64 --json $OUT/wo.json > $OUT/wo.txt 2>&1; echo "wo rc=$? $(( $(date +%s) - s )) s"
date -u +%H:%M:%S; timeout 80 moe-core bench --quiet --backends triton --peers= --preset gpt-oss-20b --scheme unquantized,mxfp4 --tokens 1,16,64,4096 --reference-max-tokens 64 --json $OUT/gptoss.json > $OUT/gptoss.txt 2>&1; echo "gptoss rc=$? $(( $(date +%s) - s )) s"
PYTHONPATH=$PWD/.scratch/s35_old timeout $(( 590 - ($(date +%s) - s) )) python3 docs/benchmarks/h100-2026-11-25-s34/ab.py schemes=unquantized,w8a16,w8a16-zp tokens=1,16,64,4096 > $OUT/ab3.txt 2>&1
echo "ab rc=$? $(( $(date +%s) - s )) s"
grep -v -i warn $OUT/wo.txt | cut -c1-160; grep -v -i warn $OUT/gptoss.txt | cut -c1-160; grep -v -i warn $OUT/ab3.txt
