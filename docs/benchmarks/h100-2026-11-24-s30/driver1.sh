# GPU call 1 (2026-11-24, session 30): one-program block-table variants (issue 12), weight-only prefill tiles of 256
# rows (issue 13), then the scratch and replay tests.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
D=docs/benchmarks/h100-2026-11-24-s30
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
timeout 150 python3 $D/table_variants.py > $OUT/table_variants.txt 2>&1; echo "tables rc=$? $(( $(date +%s) - s )) s"; cat $OUT/table_variants.txt
timeout 330 python3 $D/wo_prefill_tiles.py mixtral-8x7b:w4a16:4096 qwen3-30b-a3b:w4a16:4096 mixtral-8x7b:w8a16:4096 qwen3-30b-a3b:w8a16:4096 > $OUT/wo_tiles.txt 2>&1; echo "tiles rc=$? $(( $(date +%s) - s )) s"; grep -v "^  skip" $OUT/wo_tiles.txt
T=plugins/triton_backend/tests
timeout $(( 585 - ($(date +%s) - s) )) python3 -m pytest -q -p no:cacheprovider $T/test_triton_scratch.py $T/test_triton_replay.py 2>&1 | tail -15 > $OUT/gpu_tests1.txt; echo "tests rc=$? $(( $(date +%s) - s )) s"; tail -3 $OUT/gpu_tests1.txt
