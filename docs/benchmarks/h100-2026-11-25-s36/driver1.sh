# GPU call 1 (2026-11-25, session 36): fused_probe.py, one-token layers as one kernel (GEMM2 fused into GEMM1 along the
# intermediate), every variant against the plugin's layer in one process, Qwen3-30B-A3B and Mixtral-8x7B bf16.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"
timeout $(( s + 570 - $(date +%s) )) python3 docs/benchmarks/h100-2026-11-25-s36/fused_probe.py 2>&1 | grep -v -i warn > $OUT/fused_probe1.txt
echo "rc=${PIPESTATUS[0]} after $(( $(date +%s) - s )) s"
cat $OUT/fused_probe1.txt
