# GPU call 2 of 2026-11-24 (issue 12, QUANT_IN in eager forwards of small layers only): in-process A/B against HEAD
# ea3a4e4 (.scratch/oldpkg), moe-core bench before/after at 1, 16 and 64 tokens, then the GPU tests this change touches.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
PYTHONPATH=$PWD/.scratch/oldpkg timeout 150 python3 docs/benchmarks/h100-2026-11-24-quantin/inproc_ab.py > $OUT/inproc_ab2.txt 2>&1; echo "ab rc=$? $(( $(date +%s) - s )) s"; cat $OUT/inproc_ab2.txt
OLD=$PWD/.scratch/before/plugins/triton_backend
PYTHONPATH=$OLD python3 -c "import moe_core_triton; print('before package:', moe_core_triton.__file__)"
B="moe-core bench --quiet --backends triton --peers torch_grouped_mm --preset qwen3-30b-a3b,mixtral-8x7b --scheme unquantized,fp8-channel,fp8-block --tokens 1,16,64 --reference-max-tokens 64"
date -u +%H:%M:%S; timeout 120 $B --json $OUT/after.json > $OUT/after.txt 2>&1; echo "after rc=$? $(( $(date +%s) - s )) s"
date -u +%H:%M:%S; PYTHONPATH=$OLD timeout 120 $B --json $OUT/before.json > $OUT/before.txt 2>&1; echo "before rc=$? $(( $(date +%s) - s )) s"
T=plugins/triton_backend/tests
timeout $(( 560 - ($(date +%s) - s) )) python3 -m pytest -q -p no:cacheprovider $T/test_triton_quant_in.py $T/test_triton_scratch.py $T/test_kernels.py -k "quant_in or QUANT or capturable or pair or scratch or matches_reference or edge" 2>&1 | tail -15 > $OUT/gpu_tests.txt; echo "tests $(( $(date +%s) - s )) s"; tail -6 $OUT/gpu_tests.txt
