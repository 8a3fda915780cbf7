# GPU call 4 (2026-11-26, session 37): the final code. The README's main job on the GPU at 1, 2 and 16 tokens (the
# first two take the one-launch layer by the data file); GPU tests of the fused, configs, tune and robustness files.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
for t in 1 2 16; do
  timeout 200 bash scripts/main.sh --tokens $t 2>&1 | grep -v -i "warn\|^  warn" | tail -14 > $OUT/main_job_tokens$t.txt
  echo "main job --tokens $t rc=${PIPESTATUS[0]} $(( $(date +%s) - s )) s"; cat $OUT/main_job_tokens$t.txt
done
(cd plugins/triton_backend && timeout $(( s + 560 - $(date +%s) )) ../../.venv/bin/python -m pytest -q -p no:cacheprovider tests/test_triton_fused.py tests/test_triton_configs.py tests/test_triton_tune.py tests/test_robustness.py 2>&1 | tail -8) > $OUT/gpu_tests4.txt
echo "tests $(( $(date +%s) - s )) s"; cat $OUT/gpu_tests4.txt
