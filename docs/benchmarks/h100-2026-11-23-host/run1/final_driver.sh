cd "$(dirname "$0")/.."
s=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
python3 -c "import torch, triton, sys; print(sys.version.split()[0], torch.__version__, triton.__version__)"
OLD=$PWD/.scratch/before12/plugins/triton_backend
B="moe-core bench --quiet --backends triton --peers torch_grouped_mm --preset qwen3-30b-a3b,mixtral-8x7b --scheme unquantized,fp8-channel,fp8-block --tokens 1,16,64,1024,4096 --reference-max-tokens 64"
D="moe-core bench --quiet --backends triton --peers= --preset deepseek-v3 --scheme fp8-block --tokens 1,64,4096,16384 --reference-max-tokens 1"
date -u +%H:%M:%S; timeout 160 $B --json $OUT/after.json > $OUT/after.txt 2>&1; echo "after rc=$? $(( $(date +%s) - s )) s"
date -u +%H:%M:%S; PYTHONPATH=$OLD timeout 160 $B --json $OUT/before.json > $OUT/before.txt 2>&1; echo "before rc=$? $(( $(date +%s) - s )) s"
date -u +%H:%M:%S; (echo "## after"; timeout 80 $D; echo "## before (e654dff)"; PYTHONPATH=$OLD timeout 80 $D) > $OUT/ds.txt 2>&1; echo "ds $(( $(date +%s) - s )) s"
cp .scratch/gpu26g.sh $OUT/driver.sh
grep "triton " $OUT/ds.txt | cut -c1-140
