# GPU call 9 (2026-11-26, session 37): TritonKernel.deterministic on the GPU. determinism.py (50 Qwen3 decode forwards
# at 1, 2 and 16 tokens, default and deterministic); the GPU tests of the fused and split-K files.
cd "$(dirname "$0")/../../.."
s=$(date +%s); E=docs/benchmarks/h100-2026-11-26-s37
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
timeout 200 python3 $E/determinism.py 2>&1 | grep -v -i warn > $OUT/determinism9.txt; echo "determinism $(( $(date +%s) - s )) s"; cat $OUT/determinism9.txt
(cd plugins/triton_backend && timeout $(( s + 560 - $(date +%s) )) python3 -m pytest -q -p no:cacheprovider tests/test_triton_fused.py tests/test_triton_split_k.py 2>&1 | tail -4) > $OUT/gpu_tests9.txt
echo "tests $(( $(date +%s) - s )) s"; cat $OUT/gpu_tests9.txt
