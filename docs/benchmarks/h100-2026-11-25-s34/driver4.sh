# GPU call 4 (2026-11-25, session 34): the final tiles (int4, fp8 and mxfp4 codes in fragment order; nvfp4 back in K
# order with 3c62fb6's tiles; untuned weight-only shapes on the swapped heuristic tile). The weight-only bench of both
# presets and of gpt-oss-20b, every row checked against the reference, each scheme against bf16 Triton in the same run;
# then the A/B against 3c62fb6 of the cells whose 4096-token tile is the heuristic's (nvfp4, w8a16-zp) or was refined
# (fp8-block-w8a16).
cd "$(dirname "$0")/../../.."
s=$(date +%s); D=docs/benchmarks/h100-2026-11-25-s34
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
python3 -c "import torch, triton; print(torch.__version__, triton.__version__, torch.version.cuda)"
W="unquantized,w4a16,w4a16-zp,w8a16,w8a16-zp,fp8-w8a16,fp8-block-w8a16,nvfp4-w4a16,mxfp4"
date -u +%H:%M:%S; timeout 330 moe-core bench --quiet --backends triton --peers= --preset qwen3-30b-a3b,mixtral-8x7b --scheme $W --tokens 1,16,64,4096 --reference-max-tokens 64 --json $OUT/wo.json > $OUT/wo.txt 2>&1; echo "wo rc=$? $(( $(date +%s) - s )) s"
date -u +%H:%M:%S; timeout 80 moe-core bench --quiet --backends triton --peers= --preset gpt-oss-20b --scheme unquantized,mxfp4 --tokens 1,16,64,4096 --reference-max-tokens 64 --json $OUT/gptoss.json > $OUT/gptoss.txt 2>&1; echo "gptoss rc=$? $(( $(date +%s) - s )) s"
PYTHONPATH=$PWD/.scratch/s34_head timeout $(( 590 - ($(date +%s) - s) )) python3 $D/ab.py schemes=nvfp4-w4a16,w8a16-zp,fp8-block-w8a16 tokens=4096 > $OUT/ab4.txt 2>&1
echo "ab rc=$? $(( $(date +%s) - s )) s"
grep -v -i warn $OUT/wo.txt | cut -c1-160; grep -v -i warn $OUT/gptoss.txt | cut -c1-160; grep -v -i warn $OUT/ab4.txt
