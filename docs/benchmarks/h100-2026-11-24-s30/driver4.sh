# GPU call 4 (2026-11-24, session 30): benchmarks now (after) and at the session's start (before, ad1ea7c, from
# .scratch/s30_before): the weight-only schemes whose 4096-token tiles changed, against bf16, and the issue-12 bench.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
OLD=$PWD/.scratch/s30_before/plugins/triton_backend
W="moe-core bench --quiet --backends triton --peers= --preset qwen3-30b-a3b,mixtral-8x7b --scheme unquantized,w4a16,w8a16,fp8-w8a16,mxfp4 --tokens 4096 --reference-max-tokens 64"
B="moe-core bench --quiet --backends triton --peers torch_grouped_mm --preset qwen3-30b-a3b,mixtral-8x7b --scheme unquantized,fp8-channel,fp8-block --tokens 1,16,64,1024,4096 --reference-max-tokens 64"
date -u +%H:%M:%S; timeout 110 $W --json $OUT/wo_after.json > $OUT/wo_after.txt 2>&1; echo "wo after rc=$? $(( $(date +%s) - s )) s"
date -u +%H:%M:%S; timeout 140 $B --json $OUT/i12_after.json > $OUT/i12_after.txt 2>&1; echo "i12 after rc=$? $(( $(date +%s) - s )) s"
date -u +%H:%M:%S; PYTHONPATH=$OLD timeout 140 $B --json $OUT/i12_before.json > $OUT/i12_before.txt 2>&1; echo "i12 before rc=$? $(( $(date +%s) - s )) s"
date -u +%H:%M:%S; PYTHONPATH=$OLD timeout $(( 590 - ($(date +%s) - s) )) $W --json $OUT/wo_before.json > $OUT/wo_before.txt 2>&1; echo "wo before rc=$? $(( $(date +%s) - s )) s"
tail -30 $OUT/wo_after.txt; tail -30 $OUT/wo_before.txt
