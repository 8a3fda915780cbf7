# GPU call 8 (2026-11-24, session 32): w8a16 and w8a16-zp decode tiles refined (tune --refine) on Mixtral-8x7B and
# Qwen3-30B-A3B (Mixtral fp8-w8a16, refined from w8a16's entries in call 5, ran 25% faster than w8a16 at 64 tokens),
# then moe-core bench of bf16, w8a16 and w8a16-zp decode with the result.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
timeout 300 python3 -m moe_core_triton.tune --refine --preset mixtral-8x7b,qwen3-30b-a3b --scheme w8a16,w8a16-zp --tokens 1,16,64 > $OUT/tune_refine8.txt 2>&1; echo "refine rc=$? $(( $(date +%s) - s )) s"; grep "T=" $OUT/tune_refine8.txt | cut -c1-200
cp plugins/triton_backend/moe_core_triton/configs/nvidia_h100_80gb_hbm3.json $OUT/configs_after_call8.json
timeout $(( 590 - ($(date +%s) - s) )) moe-core bench --quiet --backends triton --peers= --preset qwen3-30b-a3b,mixtral-8x7b --scheme unquantized,w8a16,w8a16-zp --tokens 1,16,64 --reference-max-tokens 64 --json $OUT/w8_final.json > $OUT/w8_final.txt 2>&1; echo "bench rc=$? $(( $(date +%s) - s )) s"; grep -v -i warn $OUT/w8_final.txt | cut -c1-150
