# GPU call 1 (2026-11-24, session 31): how the graph time of small layers depends on how the L2 is emptied before each
# replay (decode_timing.py), and where one Qwen3 decode forward's GPU time goes (benchmarks/profile_layer.py).
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
D=docs/benchmarks/h100-2026-11-24-s31
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
python3 -c 'import torch, triton; print(torch.__version__, triton.__version__)'
timeout 300 python3 $D/decode_timing.py > $OUT/decode_timing.txt 2>&1; echo "timing rc=$? $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/decode_timing.txt
timeout 120 python3 benchmarks/profile_layer.py --preset qwen3-30b-a3b --scheme unquantized,w4a16 --tokens 1,16 > $OUT/profile.txt 2>&1; echo "profile rc=$? $(( $(date +%s) - s )) s"; cat $OUT/profile.txt
