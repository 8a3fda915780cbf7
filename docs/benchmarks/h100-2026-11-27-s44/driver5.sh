# GPU call 5 (2026-11-27, session 44): call 3's one row whose GPU idled more than 40 us per eager call beyond the
# replays' (Mixtral-8x7B fp8-block at 1024 tokens, 98.6 us), benched again three times with its fp8-channel neighbour.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; date -u +%H:%M:%S
for i in 1 2 3; do
  timeout $(( s + 280 - $(date +%s) )) moe-core bench --quiet --backends triton --peers= --preset mixtral-8x7b \
    --scheme fp8-block,fp8-channel --tokens 1024 --reference-max-tokens 1 --json $OUT/idle5_$i.json > $OUT/idle5_$i.txt 2>&1
  echo "bench $i rc=$? after $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/idle5_$i.txt | grep triton | cut -c1-150
done
