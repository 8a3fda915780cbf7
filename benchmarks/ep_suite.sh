#!/usr/bin/env bash
# Expert parallelism on a 4-GPU machine in one run of about 8 minutes: equality with the single-GPU layer
# and CUDA-graph capture of every dispatcher at world sizes 2 and 4; timing with one method (ranks aligned
# by a barrier, CUDA events, eager and graph replay) of the raw all_to_all_single, dispatch + combine, the
# layer, and one GPU on EP = 1 and on the whole work; a torch.profiler table of each dispatcher's dispatch +
# combine (first shape, 4096 tokens per rank, in the timing logs); the scaling table, the targets, and the
# measured dispatcher ranking of world sizes 2 and 4.
# Usage, from the repository root on the GPU machine:  bash benchmarks/ep_suite.sh
# Writes 8 files under $OUT (default ./out): summary.txt (also printed; machine and versions first),
# ep_world2.{json,log} (timing), ep_world2_equality.{json,log}, ep_world4.{json,log} and
# dispatch_ranking.json (for MOE_CORE_DISPATCH_RANKING_FILE).
# World 2's equality runs on GPUs 2-3 while its timing runs on GPUs 0-1 (separate NVLink pairs; the
# equality run's compiles share the host's 64 cores). On a 2-GPU machine world 2 runs alone (about 7 minutes). Each step has its own time limit, timing starts no
# new case 50 s before it, and every step runs whatever happened before: a record is always written.
#   EP_ITERS (10) samples per timing; EP_WORLD2_S (190), EP_WORLD4_S (280) limits of the two steps.
#   EP_ARGS: more ep_gpu.py arguments, last (they win). The script's logic on CPUs, gloo, tiny shapes:
#   EP_GPUS=4 EP_ARGS="--device cpu --shapes tiny --equality-shapes tiny" bash benchmarks/ep_suite.sh
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${OUT:-$PWD/out}"
mkdir -p "$out"
cd "$root"
# NVLink multicast stays off (symmetric memory, NCCL NVLS, NVSHMEM).
export TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
iters="${EP_ITERS:-10}"
world2_s="${EP_WORLD2_S:-190}"
world4_s="${EP_WORLD4_S:-280}"
begin=$(date +%s)
machine="$(
  date -u
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  nvidia-smi topo -m | head -6
  git log -1 --format='commit %H' 2>/dev/null
  # The project and the Triton plugin on the machine's Python (torch and triton are the image's), unless this
  # checkout already imports from here.
  python3 -c 'import moe_core, moe_core_triton, sys; sys.exit(not moe_core.__file__.startswith(sys.argv[1]))' "$root" 2>/dev/null ||
    python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend 2>&1 | tail -3
  python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__,
    "nccl", torch.cuda.nccl.version() if torch.cuda.is_available() else "-")'
)"
echo "$machine"
gpus=${EP_GPUS:-$(python3 -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)}
read -r -a extra <<< "${EP_ARGS:-}"
echo "set-up done after $(( $(date +%s) - begin )) s; $gpus GPUs"

ep() {  # ep NAME WORLD LIMIT_S GPUS ARGS...: one limited run of ep_gpu.py on the given GPUs
  local name=$1 world=$2 limit=$3 devices=$4
  shift 4
  if [ "$gpus" -lt "$world" ]; then echo "$name: needs $world GPUs, $gpus here: skipped" > "$out/$name.log"; return; fi
  CUDA_VISIBLE_DEVICES=$devices timeout -k 15 "$limit" python3 benchmarks/ep_gpu.py --world "$world" \
    --json "$out/$name.json" "$@" "${extra[@]}" > "$out/$name.log" 2>&1
  echo "$name: exit $? after $(( $(date +%s) - begin )) s"
}
timing=(--phases graphs,bench,profile --tokens 4096,256,16 --iters "$iters" --write-dispatch-ranking "$out/dispatch_ranking.json")
if [ "$gpus" -ge 4 ]; then  # world 2's equality on GPUs 2-3 beside its timing on GPUs 0-1
  ep ep_world2_equality 2 "$world2_s" 2,3 --phases equality --shapes qwen3-30b-a3b,mixtral-8x7b &
else  # two or three GPUs: one after the other, world 4 skipped
  ep ep_world2_equality 2 "$world2_s" 0,1 --phases equality --shapes qwen3-30b-a3b,mixtral-8x7b
fi
ep ep_world2 2 "$world2_s" 0,1 "${timing[@]}" --budget-s $(( world2_s - 50 )) --shapes qwen3-30b-a3b,mixtral-8x7b
wait
ep ep_world4 4 "$world4_s" 0,1,2,3 "${timing[@]}" --phases equality,graphs,bench --budget-s $(( world4_s - 50 )) \
  --shapes deepseek-v3,qwen3-30b-a3b,mixtral-8x7b --equality-shapes deepseek-v3,qwen3-30b-a3b
{
  echo "$machine"
  python3 benchmarks/ep_summary.py "$out/ep_world2_equality.json" "$out/ep_world2.json" "$out/ep_world4.json"
  echo "total $(( $(date +%s) - begin )) s; command: bash benchmarks/ep_suite.sh (EP_ITERS=$iters)"
} > "$out/summary.txt" 2>&1
tail -n +$(( $(echo "$machine" | wc -l) + 1 )) "$out/summary.txt"
