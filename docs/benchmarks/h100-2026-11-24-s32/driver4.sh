# GPU call 4 (2026-11-24, session 32): split-K forwards (and GEMM2's atomic reduction) zero their float32 sums and cast
# the output by launches, so eager forwards that pick split-K tiles are replayed (moe_core_triton.reduce). GPU tests of
# the replay, split-K, robustness (split paths) and weight-only files, then moe-core bench of the 1-token weight-only
# rows whose tiles split K (eager and host columns) and of gpt-oss-20b.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
T=plugins/triton_backend/tests
timeout 300 python3 -m pytest -q -p no:cacheprovider $T/test_triton_replay.py $T/test_triton_split_k.py $T/test_triton_weight_only.py 2>&1 | tail -8 > $OUT/gpu_tests4a.txt; echo "tests rc=$? $(( $(date +%s) - s )) s"; tail -4 $OUT/gpu_tests4a.txt
timeout 120 python3 -m pytest -q -p no:cacheprovider $T/test_robustness.py -k "split" 2>&1 | tail -4 > $OUT/gpu_tests4b.txt; echo "robustness $(( $(date +%s) - s )) s"; tail -2 $OUT/gpu_tests4b.txt
timeout $(( 590 - ($(date +%s) - s) )) moe-core bench --quiet --backends triton --peers= --preset qwen3-30b-a3b,mixtral-8x7b,gpt-oss-20b --scheme unquantized,w4a16,mxfp4,nvfp4-w4a16 --tokens 1 --reference-max-tokens 64 --json $OUT/host1.json > $OUT/host1.txt 2>&1; echo "bench rc=$? $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/host1.txt | cut -c1-120
