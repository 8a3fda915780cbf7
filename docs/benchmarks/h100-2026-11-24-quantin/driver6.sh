# GPU call 6 of 2026-11-24: the issue-12 bench (both presets, three schemes, 1 to 4096 tokens) with the plugin at the
# end of the session (after) and at its start (before: ea3a4e4, .scratch/before), one after the other; then the new
# exactness tests of the weight-only bit tricks.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
OLD=$PWD/.scratch/before/plugins/triton_backend
PYTHONPATH=$OLD python3 -c "import moe_core_triton; print('before package:', moe_core_triton.__file__)"
B="moe-core bench --quiet --backends triton --peers torch_grouped_mm --preset qwen3-30b-a3b,mixtral-8x7b --scheme unquantized,fp8-channel,fp8-block --tokens 1,16,64,1024,4096 --reference-max-tokens 64"
date -u +%H:%M:%S; timeout 200 $B --json $OUT/final_after.json > $OUT/final_after.txt 2>&1; echo "after rc=$? $(( $(date +%s) - s )) s"
date -u +%H:%M:%S; PYTHONPATH=$OLD timeout 200 $B --json $OUT/final_before.json > $OUT/final_before.txt 2>&1; echo "before rc=$? $(( $(date +%s) - s )) s"
T=plugins/triton_backend/tests
timeout $(( 575 - ($(date +%s) - s) )) python3 -m pytest -q -p no:cacheprovider $T/test_triton_weight_only.py -k "exactly or quant_in" $T/test_triton_quant_in.py 2>&1 | tail -5 > $OUT/gpu_tests6.txt; echo "tests $(( $(date +%s) - s )) s"; tail -3 $OUT/gpu_tests6.txt
