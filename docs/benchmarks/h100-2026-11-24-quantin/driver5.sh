# GPU call 5 of 2026-11-24 (issue 13, integer codes of prefill tiles made float32 by their bits): in-process A/B
# against HEAD ea3a4e4 (.scratch/oldpkg) from 16 to 4096 tokens, then the weight-only GPU tests.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
PYTHONPATH=$PWD/.scratch/oldpkg timeout 280 python3 docs/benchmarks/h100-2026-11-24-quantin/inproc_ab.py prefill > $OUT/inproc_ab_prefill.txt 2>&1; echo "ab rc=$? $(( $(date +%s) - s )) s"; cat $OUT/inproc_ab_prefill.txt
T=plugins/triton_backend/tests
timeout $(( 570 - ($(date +%s) - s) )) python3 -m pytest -q -p no:cacheprovider $T/test_triton_weight_only.py 2>&1 | tail -15 > $OUT/gpu_tests5.txt; echo "tests $(( $(date +%s) - s )) s"; tail -4 $OUT/gpu_tests5.txt
