# GPU call 6 (2026-11-26, session 37): fused_w8_probe.py, whether the one-launch layer would pay for 8-bit weight-only
# decode (int8 and e4m3 codes, per-channel scales) against the plugin's two-GEMM w8a16 and fp8-w8a16 and bf16.
cd "$(dirname "$0")/../../.."
s=$(date +%s); E=docs/benchmarks/h100-2026-11-26-s37
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
cd $E && timeout 540 python3 fused_w8_probe.py 2>&1 | grep -v -i warn > $OUT/fused_w8_probe6.txt
echo "probe rc=${PIPESTATUS[0]} $(( $(date +%s) - s )) s"; cat $OUT/fused_w8_probe6.txt
