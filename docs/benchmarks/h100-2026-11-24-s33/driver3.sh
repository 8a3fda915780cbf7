# GPU call 3 (2026-11-24, session 33), the committed kernels (dad13ae: e8m0 scales by exp2 again, so mxfp4 and nvfp4
# compile to the SASS of b2a3dfb): moe-core bench of every weight-only scheme against bf16 at 1, 16, 64 and 4096
# tokens (Qwen3-30B-A3B, Mixtral-8x7B; gpt-oss-20b mxfp4), every row checked against the reference up to 64 tokens.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
W="unquantized,w4a16,w4a16-zp,w8a16,w8a16-zp,fp8-w8a16,fp8-block-w8a16,nvfp4-w4a16,mxfp4"
date -u +%H:%M:%S; timeout 400 moe-core bench --quiet --backends triton --peers= --preset qwen3-30b-a3b,mixtral-8x7b --scheme $W --tokens 1,16,64,4096 --reference-max-tokens 64 --json $OUT/wo.json > $OUT/wo.txt 2>&1; echo "wo rc=$? $(( $(date +%s) - s )) s"
date -u +%H:%M:%S; timeout 100 moe-core bench --quiet --backends triton --peers= --preset gpt-oss-20b --scheme unquantized,mxfp4 --tokens 1,16,64,4096 --reference-max-tokens 64 --json $OUT/gptoss.json > $OUT/gptoss.txt 2>&1; echo "gptoss rc=$? $(( $(date +%s) - s )) s"
grep -v -i warn $OUT/wo.txt | cut -c1-160; grep -v -i warn $OUT/gptoss.txt | cut -c1-160
