# GPU call 1 (2026-11-27, session 41; the first words design, stored bytes grouped along K only: wrong values in the GEMMs): e2m1 codes stored as words (e2m1_words.py) under bfloat16 on the GPU: the words
# tests and the fp4 weight-only tests, then an in-process A/B of nvfp4 and mxfp4 layers against 2af6fa2's plugin
# (session 34's ab.py; the old plugin renamed moe_core_triton_old in .scratch/s41_old, not committed), same data file.
cd "$(dirname "$0")/../../.."
s=$(date +%s); D=docs/benchmarks; T=plugins/triton_backend/tests
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; date -u +%H:%M:%S
timeout 200 python3 -m pytest -q -p no:cacheprovider $T/test_triton_e2m1_words.py $T/test_triton_k_order.py \
  $T/test_triton_weight_only.py -k "words or e2m1 or k_order or nvfp4 or mxfp4" > $OUT/gpu_tests1.txt 2>&1
echo "tests rc=$? after $(( $(date +%s) - s )) s"; grep -v "^\s*$" $OUT/gpu_tests1.txt | tail -12
PYTHONPATH=$PWD/.scratch/s41_old timeout $(( s + 540 - $(date +%s) )) python3 $D/h100-2026-11-25-s34/ab.py \
  presets=mixtral-8x7b,qwen3-30b-a3b schemes=nvfp4-w4a16,mxfp4 tokens=16,1,64,4096 > $OUT/ab1.txt 2>&1
echo "ab rc=$? after $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/ab1.txt
PYTHONPATH=$PWD/.scratch/s41_old timeout $(( s + 590 - $(date +%s) )) python3 $D/h100-2026-11-25-s34/ab.py \
  presets=gpt-oss-20b schemes=unquantized,mxfp4 tokens=16,4096 > $OUT/ab1b.txt 2>&1
echo "ab rc=$? after $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/ab1b.txt
