# GPU call 4 (2026-11-24, session 33): w4a16 tiles refined on the new kernel (codes in fragment order, int4 by PTX,
# bfloat16 prefill scaling): `tune --refine` from the file's entries at 1, 16, 64 and 4096 tokens on both presets, then
# the bench of w4a16 against bf16 with the refined file.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
C=plugins/triton_backend/moe_core_triton/configs/nvidia_h100_80gb_hbm3.json
for p in mixtral-8x7b qwen3-30b-a3b; do
  timeout $(( 420 - ($(date +%s) - s) )) python3 -m moe_core_triton.tune --preset $p --scheme w4a16 --tokens 1,16,64,4096 --refine 2>&1 | grep -v -i "warn\|skip" >> $OUT/tune4.txt
  echo "tune $p rc=$? $(( $(date +%s) - s )) s"
done
cp $C $OUT/configs_after_call4.json
timeout $(( 590 - ($(date +%s) - s) )) moe-core bench --quiet --backends triton --peers= --preset qwen3-30b-a3b,mixtral-8x7b --scheme unquantized,w4a16 --tokens 1,16,64,4096 --reference-max-tokens 64 --json $OUT/w4.json > $OUT/w4.txt 2>&1; echo "bench rc=$? $(( $(date +%s) - s )) s"
cat $OUT/tune4.txt | cut -c1-220; grep -v -i warn $OUT/w4.txt | cut -c1-150
