# GPU call 1 (2026-11-25, session 34): every weight-only scheme's codes in fragment order (WeightOnly.permutes widened).
# Full tile searches of fp8-w8a16 and mxfp4 on both presets at 1, 16, 64 and 4096 tokens (search.sh); the A/B of
# those against 3c62fb6 (.scratch/s34_head: their codes in K order, its tiles) in call 2.
cd "$(dirname "$0")/../../.."
s=$(date +%s); D=docs/benchmarks/h100-2026-11-25-s34
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
bash $D/search.sh 1 $(( s + 585 )) 1,16,64,4096 qwen3-30b-a3b:fp8-w8a16 mixtral-8x7b:fp8-w8a16 qwen3-30b-a3b:mxfp4 mixtral-8x7b:mxfp4
cut -c1-420 $OUT/tune_1.txt
grep -h "candidates in\|Error" /tmp/warm_*.log | sed "s/with LaunchConfig.*candidates in/.../" > $OUT/warm_1.txt
