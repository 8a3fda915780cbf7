# GPU call 1 (2026-11-27, session 40): GATE_UP GEMM1 tiles (gate and up rows in one tile, one accumulator) on the GPU:
# their tests, then the tile search at 4096 tokens for every weight-only scheme of Mixtral-8x7B and gpt-oss-20b's mxfp4
# (the candidates now include 256-row GATE_UP tiles for GEMM1).
cd "$(dirname "$0")/../../.."
s=$(date +%s); C=plugins/triton_backend/moe_core_triton/configs/nvidia_h100_80gb_hbm3.json
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; date -u +%H:%M:%S
(cd plugins/triton_backend && timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_triton_weight_only.py -k "gate" > $OUT/gpu_tests1.txt 2>&1)
echo "tests rc=$? after $(( $(date +%s) - s )) s"; tail -3 $OUT/gpu_tests1.txt
W=w4a16,w4a16-zp,w8a16,w8a16-zp,fp8-w8a16,fp8-block-w8a16,nvfp4-w4a16,mxfp4
timeout $(( s + 585 - $(date +%s) )) python3 -m moe_core_triton.tune --jobs 16 --preset mixtral-8x7b --scheme $W --tokens 4096 2>&1 \
  | grep -v -i "warn\|skip" > $OUT/tune_1.txt
echo "tune rc=${PIPESTATUS[0]} after $(( $(date +%s) - s )) s"; cp $C $OUT/configs_after_call1.json; cut -c1-330 $OUT/tune_1.txt | tail -20
