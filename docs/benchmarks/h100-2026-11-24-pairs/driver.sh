# The GPU call behind docs/benchmarks/triton-h100.md "Run of 2026-11-24" (issue 12, PairTable forwards):
# the plugin before (6cfc621, exported to .scratch/before27) and after, in one call, one after the other.
cd "$(dirname "$0")/../../.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
OLD=$PWD/.scratch/before27/plugins/triton_backend
PYTHONPATH=$OLD python3 -c "import moe_core_triton; print('before package:', moe_core_triton.__file__)"
B="moe-core bench --quiet --backends triton --peers torch_grouped_mm --preset qwen3-30b-a3b,mixtral-8x7b --scheme unquantized,fp8-channel,fp8-block --tokens 1,16,64,1024,4096 --reference-max-tokens 64"
date -u +%H:%M:%S; timeout 190 $B --json $OUT/after.json > $OUT/after.txt 2>&1; echo "after rc=$? $(( $(date +%s) - s )) s"
date -u +%H:%M:%S; PYTHONPATH=$OLD timeout 190 $B --json $OUT/before.json > $OUT/before.txt 2>&1; echo "before rc=$? $(( $(date +%s) - s )) s"
D="moe-core bench --quiet --backends triton --peers= --preset deepseek-v3 --scheme fp8-block --tokens 1,16 --reference-max-tokens 1"
(echo "## after"; timeout 60 $D; echo "## before (6cfc621)"; PYTHONPATH=$OLD timeout 60 $D) > $OUT/ds.txt 2>&1; echo "ds $(( $(date +%s) - s )) s"
