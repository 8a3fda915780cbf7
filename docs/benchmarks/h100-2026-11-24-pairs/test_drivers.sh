s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
timeout 230 python3 -m pytest -q -x plugins/triton_backend/tests/test_kernels.py plugins/triton_backend/tests/test_robustness.py plugins/triton_backend/tests/test_triton_scratch.py plugins/triton_backend/tests/test_triton_split_k.py plugins/triton_backend/tests/test_triton_quant_out.py plugins/triton_backend/tests/test_triton_launch.py 2>&1 | tail -15 > $OUT/gpu_tests.txt; echo "tests rc=$? $(( $(date +%s) - s )) s"; tail -3 $OUT/gpu_tests.txt
PYTHONPATH=$PWD/.scratch/oldpkg27 timeout 170 python3 .scratch/inproc_ab27.py > $OUT/inproc_ab.txt 2>&1; echo "ab rc=$? $(( $(date +%s) - s )) s"; cat $OUT/inproc_ab.txt
timeout 150 python3 .scratch/pair_threshold.py > $OUT/pair_threshold.txt 2>&1; echo "thr rc=$? $(( $(date +%s) - s )) s"; cat $OUT/pair_threshold.txt
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
timeout 480 python3 -m pytest -q plugins/triton_backend/tests -p no:cacheprovider 2>&1 | tail -25 > $OUT/gpu_tests.txt; echo "tests rc=$? $(( $(date +%s) - s )) s"; tail -8 $OUT/gpu_tests.txt
PYTHONPATH=$PWD/.scratch/oldpkg27 timeout 100 python3 .scratch/inproc_ab27.py > $OUT/inproc_ab.txt 2>&1; echo "ab rc=$? $(( $(date +%s) - s )) s"; cat $OUT/inproc_ab.txt
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
T=plugins/triton_backend/tests
timeout 420 python3 -m pytest -q -p no:cacheprovider $T/test_robustness.py $T/test_triton_scratch.py $T/test_triton_split_k.py $T/test_triton_quant_out.py $T/test_triton_launch.py $T/test_triton_swap_ab.py $T/test_triton_tma.py $T/test_triton_tune.py $T/test_triton_block_scales.py $T/test_triton_weight_only.py 2>&1 | tail -25 > $OUT/gpu_tests2.txt; echo "tests rc=$? $(( $(date +%s) - s )) s"; tail -8 $OUT/gpu_tests2.txt
