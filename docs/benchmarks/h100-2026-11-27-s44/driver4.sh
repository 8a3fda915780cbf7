# GPU call 4 (2026-11-27, session 44): DeepSeek-V3 fp8-block at 16384 tokens (issue 12's last target), the command of
# session 38's call 9, on the code as committed (d48db67).
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; date -u +%H:%M:%S
timeout 150 moe-core bench --quiet --backends triton --peers '' --preset deepseek-v3 --scheme fp8-block --tokens 16384 \
  --reference-max-tokens 1 --json $OUT/deepseek4.json > $OUT/deepseek4.txt 2>&1
echo "deepseek rc=$? $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/deepseek4.txt | cut -c1-170
