#!/usr/bin/env bash
# One two-GPU run for the DeepEP plugin: build DeepEP (unless it imports), install the project, report,
# then scripts/gpu_check.py (equality, graph replay, timing). Logs go to ./gpu-out, packed into
# $OUT/logs.tgz after every step when $OUT is set. Run from the repo root on a machine with two NVLink GPUs:
#   bash plugins/deepep_backend/scripts/gpu_check.sh build/deepep-src
# build/deepep-src: DeepEP at tag v1.2.1 (see moe_core_deepep/build_deepep.sh's header).
set -u
src=${1:?usage: gpu_check.sh DEEPEP_SOURCE_DIR}
out=gpu-out
mkdir -p "$out"
export PYTHONUNBUFFERED=1
step() { local limit=$1 name=$2; shift 2; echo "== $name (limit ${limit}s)"; local t0=$SECONDS
         timeout "$limit" "$@" > "$out/$name.log" 2>&1; local rc=$?; echo "   rc=$rc in $((SECONDS - t0))s"; tail -n 4 "$out/$name.log"
         if [[ -n ${OUT:-} ]]; then tar czf "$OUT/logs.tgz" -C "$out" .; fi; return $rc; }

python3 -c "import deep_ep" 2>/dev/null || step 330 build bash plugins/deepep_backend/moe_core_deepep/build_deepep.sh "$src" || exit 1
step 90 install python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend -e plugins/deepep_backend
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nvidia-smi topo -m | head -4
  python3 -c "import sys, torch, deep_ep; print('python', sys.version.split()[0], 'torch', torch.__version__, 'nccl', torch.cuda.nccl.version())"
  pip list 2>/dev/null | grep -iE "deep.ep|nvshmem"; } > "$out/env.txt" 2>&1; cat "$out/env.txt"
step 30 doctor moe-core doctor
step ${CHECK_LIMIT:-300} check python3 plugins/deepep_backend/scripts/gpu_check.py --json "$out/deepep_gpu.json"
rc=$?
grep -hE "^(PASS|FAIL|ALL PASS|SOME)" "$out/check.log"
if [[ -n ${OUT:-} ]]; then tar czf "$OUT/logs.tgz" -C "$out" .; fi
exit $rc
