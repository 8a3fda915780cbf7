#!/bin/bash
# Scratch driver for the H100 run (issue 12, host overhead): tests, before/after bench, host pieces.
export PYTHONUNBUFFERED=1
O=$OUT
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend >/dev/null 2>&1
L=$O/env_and_tests.log
{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__)"
  lscpu | grep "Model name"
  echo "after plugin:  $(python3 -c 'import moe_core_triton; print(moe_core_triton.__file__)')"
  echo "before plugin: $(PYTHONPATH=.scratch/base/plugins/triton_backend python3 -c 'import moe_core_triton; print(moe_core_triton.__file__)')"
  echo "== python -m pytest -q -p no:cacheprovider -n 8 plugins/triton_backend"
  timeout 170 python3 -m pytest -q -p no:cacheprovider -n 8 plugins/triton_backend 2>&1 | grep -v "PytestBenchmarkWarning\|warner(" | tail -25
} > $L 2>&1
B="moe-core bench --quiet --backends triton --peers= --preset qwen3-30b-a3b,mixtral-8x7b --scheme unquantized,fp8-block,fp8-channel"
echo "== $B --tokens 1,16,64,1024,4096 --json bench_after.json" >> $L
timeout 150 $B --tokens 1,16,64,1024,4096 --json $O/bench_after.json > $O/bench_after.txt 2>&1; echo "after rc=$?" >> $L
echo "== PYTHONPATH=<baseline plugin> $B --tokens 1,16,64,1024,4096 --json bench_before.json" >> $L
PYTHONPATH=.scratch/base/plugins/triton_backend timeout 150 $B --tokens 1,16,64,1024,4096 --json $O/bench_before.json > $O/bench_before.txt 2>&1; echo "before rc=$?" >> $L
for i in 2; do
  echo "== repeat $i: $B --tokens 1,16 (after, then before)" >> $O/repeat.txt
  timeout 60 $B --tokens 1,16 >> $O/repeat.txt 2>&1
  PYTHONPATH=.scratch/base/plugins/triton_backend timeout 60 $B --tokens 1,16 >> $O/repeat.txt 2>&1
done
echo "repeats done" >> $L
timeout 45 python3 benchmarks/host_overhead.py > $O/host_overhead_after.txt 2>&1; echo "host rc=$?" >> $L
tail -4 $L
