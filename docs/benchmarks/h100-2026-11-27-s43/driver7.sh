# GPU call 7 (2026-11-27, session 43): the one-launch decode layer (fused.py) asking the L2 for its w2 columns before
# GEMM1 (prefetch.global.L2::evict_last, one per line), and reading w13 with evict_first. The fused GPU tests, then
# A/Bs in one process (session 34's ab.py, CUDA graphs, L2 emptied): 2f6d8ec's plugin (.scratch/s43_old) against the
# new one, and the new one without evict_first (.scratch/s43_pf) against it; neither copy is committed.
cd "$(dirname "$0")/../../.."
s=$(date +%s); D=docs/benchmarks; T=plugins/triton_backend/tests
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; date -u +%H:%M:%S
timeout 150 python3 -m pytest -q -p no:cacheprovider $T/test_triton_fused.py -x > $OUT/gpu_tests7.txt 2>&1; tail -n 1 $OUT/gpu_tests7.txt
grep -h -E "^(FAILED|ERROR)" $OUT/gpu_tests7.txt | head
for v in old pf; do
  PYTHONPATH=$PWD/.scratch/s43_$v timeout 150 python3 $D/h100-2026-11-25-s34/ab.py presets=qwen3-30b-a3b,gpt-oss-20b \
    schemes=unquantized tokens=1,2,4 > $OUT/ab7_$v.txt 2>&1
  echo "ab $v rc=$? after $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/ab7_$v.txt
done
