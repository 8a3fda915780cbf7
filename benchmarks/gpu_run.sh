#!/usr/bin/env bash
# One GPU-machine session: install the project beside the image's torch/triton, run the Triton
# plugin's tests compiled (bf16 included), the conformance numerics, then `moe-core bench`.
# Usage (on the device machine, from the repository root):
#   bash benchmarks/gpu_run.sh [check|bench|all] [bench args...]
# Results go to $OUT (or ./out): pytest log, conformance JSON, bench JSON/CSV/PNG, ranking file.
set -uo pipefail
stage="${1:-all}"; shift || true
out="${OUT:-$PWD/out}"; mkdir -p "$out"
export PYTHONUNBUFFERED=1
if [ -d .whl ]; then  # test dependencies the GPU image may lack, carried as wheels
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend -e examples/oot_plugin > "$out/install.log" 2>&1 || { cat "$out/install.log"; exit 1; }
python3 - <<'PY'
import torch, triton, sys
print(f"python {sys.version.split()[0]} torch {torch.__version__} triton {triton.__version__} gpu {torch.cuda.get_device_name()} cc {torch.cuda.get_device_capability()}")
PY
if [ "$stage" = check ] || [ "$stage" = all ]; then
  python3 -m pytest -q -p no:cacheprovider plugins/triton_backend/tests 2>&1 | tee "$out/pytest_triton_gpu.log" | tail -15
  python3 - <<'PY' 2>&1 | tee "$out/conformance_gpu.log" | tail -8
import json, os, torch
from moe_core.config import MoEConfig
from moe_core.registry import Registry
from moe_core.testing import conformance
reg = Registry()
configs = [MoEConfig(num_experts=16, top_k=4, hidden_size=512, intermediate_size=256, dtype=d) for d in (torch.bfloat16, torch.float16)]
configs.append(MoEConfig(num_experts=5, top_k=1, hidden_size=200, intermediate_size=136, dtype=torch.bfloat16))
records = {}
for name in ("triton", "triton_batched"):
    records[name] = conformance.check_numerics(reg, name, device="cuda", configs=configs, tokens=(1, 3, 64, 257))
    worst = max((r["rel_err"] for r in records[name] if "rel_err" in r), default=None)
    print(f"{name}: {sum('rel_err' in r for r in records[name])} cases within tolerance, worst rel err {worst:.3g}")
json.dump(records, open(os.path.join(os.environ.get("OUT", "out"), "conformance_gpu.json"), "w"), indent=1)
PY
fi
if [ "$stage" = bench ] || [ "$stage" = all ]; then
  moe-core bench --quiet --json "$out/bench.json" --csv "$out/bench.csv" --plot "$out/bench.png" "$@" 2>&1 | tee "$out/bench.txt" | tail -120
fi
