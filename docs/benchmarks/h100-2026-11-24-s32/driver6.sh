# GPU call 6 (2026-11-24, session 32), the final kernels and tiles: moe-core bench of every weight-only scheme against
# bf16 at 1, 16, 64 and 4096 tokens (Qwen3-30B-A3B, Mixtral-8x7B; gpt-oss-20b mxfp4), then the weight-only GPU tests
# not run in calls 1, 4 and 5 (graph capture, batched format, DeepSeek-sized K, odd sizes).
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
W="unquantized,w4a16,w4a16-zp,w8a16,w8a16-zp,fp8-w8a16,fp8-block-w8a16,nvfp4-w4a16,mxfp4"
date -u +%H:%M:%S; timeout 340 moe-core bench --quiet --backends triton --peers= --preset qwen3-30b-a3b,mixtral-8x7b --scheme $W --tokens 1,16,64,4096 --reference-max-tokens 64 --json $OUT/wo_final.json > $OUT/wo_final.txt 2>&1; echo "wo rc=$? $(( $(date +%s) - s )) s"
date -u +%H:%M:%S; timeout 60 moe-core bench --quiet --backends triton --peers= --preset gpt-oss-20b --scheme unquantized,mxfp4 --tokens 1,16,64,4096 --reference-max-tokens 64 --json $OUT/gptoss_final.json > $OUT/gptoss_final.txt 2>&1; echo "gptoss rc=$? $(( $(date +%s) - s )) s"
T=plugins/triton_backend/tests
timeout $(( 590 - ($(date +%s) - s) )) python3 -m pytest -q -p no:cacheprovider $T/test_triton_weight_only.py -k "graph or batched or deepseek or 7168 or odd or clamp" 2>&1 | tail -4 > $OUT/gpu_tests6.txt; echo "tests $(( $(date +%s) - s )) s"; tail -2 $OUT/gpu_tests6.txt
grep -v -i warn $OUT/wo_final.txt | cut -c1-150; grep -v -i warn $OUT/gptoss_final.txt | cut -c1-150
