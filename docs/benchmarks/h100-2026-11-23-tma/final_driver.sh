cd "$(dirname "$0")/.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
python3 -c "import torch, triton, sys; print(sys.version.split()[0], torch.__version__, triton.__version__)"
T=plugins/triton_backend/tests
timeout 200 python3 -m pytest -q -p no:cacheprovider $T/test_triton_quant_out.py $T/test_triton_tma.py $T/test_kernels.py $T/test_triton_block_scales.py $T/test_triton_launch.py 2>&1 | tail -4 > $OUT/tests.txt; cat $OUT/tests.txt; echo "tests $(( $(date +%s) - s )) s"
OLD=$PWD/.scratch/before12/plugins/triton_backend
B="moe-core bench --quiet --backends triton --peers torch_grouped_mm --preset qwen3-30b-a3b,mixtral-8x7b --scheme unquantized,fp8-channel,fp8-block --tokens 1,16,64,1024,4096 --reference-max-tokens 64"
D="moe-core bench --quiet --backends triton --peers= --preset deepseek-v3 --scheme fp8-block --tokens 1,64,4096,16384 --reference-max-tokens 1"
date -u +%H:%M:%S; timeout 150 $B --json $OUT/after12.json > $OUT/after12.txt 2>&1; echo "after rc=$? $(( $(date +%s) - s )) s"
date -u +%H:%M:%S; PYTHONPATH=$OLD timeout 150 $B --json $OUT/before12.json > $OUT/before12.txt 2>&1; echo "before rc=$? $(( $(date +%s) - s )) s"
date -u +%H:%M:%S; (echo "## after"; timeout 90 $D; echo "## before (e654dff)"; PYTHONPATH=$OLD timeout 90 $D) > $OUT/ds.txt 2>&1; echo "ds $(( $(date +%s) - s )) s"
W="unquantized,w4a16,w4a16-zp,w8a16,w8a16-zp,fp8-w8a16,fp8-block-w8a16,nvfp4-w4a16,mxfp4"
date -u +%H:%M:%S; (timeout 200 moe-core bench --quiet --backends triton --peers= --preset qwen3-30b-a3b,mixtral-8x7b --scheme $W --tokens 1,16,64,4096 --reference-max-tokens 64 --json $OUT/wo.json; echo "## gpt-oss-20b"; timeout 60 moe-core bench --quiet --backends triton --peers= --preset gpt-oss-20b --scheme unquantized,mxfp4 --tokens 1,16,64,4096 --reference-max-tokens 64) > $OUT/wo.txt 2>&1; echo "wo $(( $(date +%s) - s )) s"
date -u +%H:%M:%S; (timeout 60 python3 benchmarks/profile_layer.py --preset qwen3-30b-a3b --scheme unquantized,fp8-block --tokens 1,64,4096; timeout 60 python3 benchmarks/profile_layer.py --preset deepseek-v3 --scheme fp8-block --tokens 16384) > $OUT/profile.txt 2>&1; echo "profile $(( $(date +%s) - s )) s"
grep -v unsupported $OUT/after12.txt | cut -c1-150; cat $OUT/ds.txt | cut -c1-150
