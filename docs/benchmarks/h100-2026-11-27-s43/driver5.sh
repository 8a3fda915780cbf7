# GPU call 5 (2026-11-27, session 43): gpt-oss-20b's mxfp4 against bf16 Triton in one run on call 4's data file (the
# final one), every row checked against the reference.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; date -u +%H:%M:%S
timeout 200 moe-core bench --quiet --backends triton --peers= --preset gpt-oss-20b --scheme unquantized,mxfp4 \
  --tokens 1,16,64,4096 --reference-max-tokens 64 --json $OUT/gptoss5.json > $OUT/gptoss5.txt 2>&1
echo "gptoss rc=$? $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/gptoss5.txt | cut -c1-150
