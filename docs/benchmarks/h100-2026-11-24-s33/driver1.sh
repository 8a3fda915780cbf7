# GPU call 1 (2026-11-24, session 33): weight-only codes stored in fragment order (k_order.py) and prefill tiles scaled
# in bfloat16: the k_order and PTX unit tests, the main loop's SASS of four GEMMs as triton 3.6 compiles them, then the
# A/B in one process against HEAD b2a3dfb (.scratch/s33_old) at 4096 tokens first.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
D=docs/benchmarks/h100-2026-11-24-s33
T=plugins/triton_backend/tests
timeout 120 python3 -m pytest -q -p no:cacheprovider $T/test_triton_k_order.py $T/test_triton_weight_only.py -k "k_order or ptx or e2m1 or e4m3 or int4_minus or fragment" 2>&1 | tail -4 > $OUT/gpu_tests1.txt; echo "tests $(( $(date +%s) - s )) s"; tail -2 $OUT/gpu_tests1.txt
cd plugins/triton_backend
for c in "w8a16 128x128x64 8 3 1" "w4a16 128x64x64 4 4 1" "fp8-w8a16 128x128x128 8 3 1" "mxfp4 128x64x64 4 3 0"; do set -- $c
  for p in moe_core_triton_old moe_core_triton; do PYTHONPATH=$PWD/../../.scratch/s33_old timeout 60 python3 ../../$D/loop_sass.py $p $1 4096 $2 $3 $4 $5 2>&1 | grep -v -i warn; done
done > $OUT/sass1.txt; echo "sass $(( $(date +%s) - s )) s"; grep -c loop $OUT/sass1.txt
cd ../..
PYTHONPATH=$PWD/.scratch/s33_old timeout $(( 585 - ($(date +%s) - s) )) python3 $D/ab.py > $OUT/ab1.txt 2>&1; echo "ab rc=$? $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/ab1.txt | tail -90
