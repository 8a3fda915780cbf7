# GPU call 1 of 2026-11-24 (issue 12, QUANT_IN): the plugin's GPU tests that cover this change and the files that
# did not run on the GPU after 6f2476d, then the in-process A/B against HEAD ea3a4e4 (.scratch/oldpkg).
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
PYTHONPATH=$PWD/.scratch/oldpkg timeout 150 python3 docs/benchmarks/h100-2026-11-24-quantin/inproc_ab.py > $OUT/inproc_ab.txt 2>&1; echo "ab rc=$? $(( $(date +%s) - s )) s"; cat $OUT/inproc_ab.txt
T=plugins/triton_backend/tests
timeout 380 python3 -m pytest -q -p no:cacheprovider $T/test_triton_quant_in.py $T/test_triton_quant_out.py $T/test_triton_tune.py $T/test_triton_block_scales.py $T/test_triton_configs.py $T/test_triton_weight_only.py $T/test_kernels.py 2>&1 | tail -30 > $OUT/gpu_tests.txt; echo "tests rc=$? $(( $(date +%s) - s )) s"; tail -12 $OUT/gpu_tests.txt
