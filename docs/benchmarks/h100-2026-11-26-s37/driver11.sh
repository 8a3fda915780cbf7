# GPU call 11 (2026-11-26, session 37): moe-core bench with graph times as the mean of each input set's median
# (harness.graph_time) and the roofline over the sets: Mixtral-8x7B and Qwen3-30B-A3B bf16 at 1, 2, 4 and 16 tokens,
# where call 10 had Mixtral's eager 41 and 33 µs above graph at 2 and 4 tokens.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
timeout 400 moe-core bench --quiet --backends triton --peers '' --preset mixtral-8x7b,qwen3-30b-a3b --scheme unquantized --tokens 1,2,4,16 --reference-max-tokens 64 --json $OUT/bench11.json > $OUT/bench11.txt 2>&1
echo "bench rc=$? $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/bench11.txt | head -20
