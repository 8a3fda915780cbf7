#!/usr/bin/env bash
# The DeepEP plugin on two NVLink GPUs, in two steps that each fit a 10-minute limit. Run from the repo root:
#   bash plugins/deepep_backend/scripts/gpu_check.sh build  build/deepep-src   # build DeepEP, install it, keep the wheel
#   bash plugins/deepep_backend/scripts/gpu_check.sh check [PHASES]            # install the project, doctor, gpu_check.py
# PHASES: comma-separated, of equality, graphs, timing (default: all three, which ran past 447 s on two H200s; under a
# 10-minute limit per command, run `check equality,graphs` and `check timing` one after the other).
# build/deepep-src: DeepEP at tag v1.2.1 (see moe_core_deepep/build_deepep.sh's header). The wheel goes to
# gpu-out/wheel and, when $OUT is set, to $OUT; `check` installs build/deepep-wheel/*.whl when deep_ep does not import
# (a fresh machine: put the wheel from the build step there). Logs go to ./gpu-out, packed into $OUT/logs.tgz.
set -u
mode=${1:?usage: gpu_check.sh build DEEPEP_SOURCE_DIR | check}
out=gpu-out
mkdir -p "$out"
export PYTHONUNBUFFERED=1
step() { local limit=$1 name=$2; shift 2; echo "== $name (limit ${limit}s)"; local t0=$SECONDS
         timeout "$limit" "$@" > "$out/$name.log" 2>&1; local rc=$?; echo "   rc=$rc in $((SECONDS - t0))s"; tail -n 4 "$out/$name.log"
         if [[ -n ${OUT:-} ]]; then tar czf "$OUT/logs.tgz" -C "$out" --exclude=wheel .; fi; return $rc; }

if [[ $mode == build ]]; then
    src=${2:?usage: gpu_check.sh build DEEPEP_SOURCE_DIR}
    step 540 build bash plugins/deepep_backend/moe_core_deepep/build_deepep.sh "$src" --wheel "$out/wheel" || exit 1
    python3 -m pip install -q --no-deps "$out"/wheel/deep_ep-*.whl || exit 1
    if [[ -n ${OUT:-} ]]; then cp "$out"/wheel/deep_ep-*.whl "$OUT"/; fi
    ls -l "$out"/wheel
    python3 -c "import deep_ep; print('deep_ep imports from', deep_ep.__file__)"
    exit $?
fi

if ! python3 -c "import deep_ep" 2>/dev/null; then
    python3 -m pip install -q --no-deps build/deepep-wheel/deep_ep-*.whl || { echo "FAIL deep_ep does not import: run the build step first"; exit 1; }
fi
step 120 install python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend -e plugins/deepep_backend
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nvidia-smi topo -m | head -4
  python3 -c "import sys, torch, deep_ep; print('python', sys.version.split()[0], 'torch', torch.__version__, 'nccl', torch.cuda.nccl.version())"
  python3 -m pip list 2>/dev/null | grep -iE "deep.ep|nvshmem"; } > "$out/env.txt" 2>&1; cat "$out/env.txt"
step 30 doctor moe-core doctor
phases=${2:-equality,graphs,timing}
step ${CHECK_LIMIT:-540} check python3 plugins/deepep_backend/scripts/gpu_check.py --phases "$phases" \
    --json "$out/deepep_gpu_${phases//,/_}.json" --write-dispatch-ranking "$out/dispatch_ranking.json"
rc=$?
grep -hE "^(PASS|FAIL|ALL PASS|SOME)" "$out/check.log"
if [[ -n ${OUT:-} ]]; then cp "$out"/deepep_gpu_*.json "$out/dispatch_ranking.json" "$OUT"/ 2>/dev/null; tar czf "$OUT/logs.tgz" -C "$out" --exclude=wheel .; fi
exit $rc
