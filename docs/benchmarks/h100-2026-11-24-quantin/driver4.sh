# GPU call 4 of 2026-11-24 (issue 13, int4 decode tiles built from the codes' bits): in-process A/B against HEAD ea3a4e4
# (.scratch/oldpkg), moe-core bench of bf16 against w4a16 / w4a16-zp at 1, 16 and 64 tokens, the weight-only GPU tests.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
PYTHONPATH=$PWD/.scratch/oldpkg timeout 200 python3 docs/benchmarks/h100-2026-11-24-quantin/inproc_ab.py int4 > $OUT/inproc_ab_wo.txt 2>&1; echo "ab rc=$? $(( $(date +%s) - s )) s"; cat $OUT/inproc_ab_wo.txt
timeout 150 moe-core bench --quiet --backends triton --peers= --preset qwen3-30b-a3b,mixtral-8x7b --scheme unquantized,w4a16,w4a16-zp --tokens 1,16,64 --reference-max-tokens 64 --json $OUT/bench_wo.json > $OUT/bench_wo.txt 2>&1; echo "bench rc=$? $(( $(date +%s) - s )) s"; cat $OUT/bench_wo.txt
T=plugins/triton_backend/tests
timeout $(( 570 - ($(date +%s) - s) )) python3 -m pytest -q -p no:cacheprovider $T/test_triton_weight_only.py 2>&1 | tail -15 > $OUT/gpu_tests4.txt; echo "tests $(( $(date +%s) - s )) s"; tail -4 $OUT/gpu_tests4.txt
