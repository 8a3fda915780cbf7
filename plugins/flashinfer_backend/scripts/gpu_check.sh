#!/usr/bin/env bash
# One GPU run for the FlashInfer plugin on a machine without network (the H100): install the
# files carried in WHEELS (default ".wheels .wheels2"; one call carries at most 64 MiB, so the set
# travels in two calls on a warm machine, the first with STEPS=install): flashinfer-trim.tar.xz (the
# flashinfer-python wheel without its nvcc sources), wheels of apache-tvm-ffi, cuda-tile,
# nvidia-ml-py, requests & co., and xz-compressed tileiras (nvidia-cuda-tileiras 13.4.92), ptxas
# (nvidia-cuda-nvcc 13.4.92) and libnvvm.so.4 (nvidia-nvvm 13.4.92). Then doctor, the GPU tests and
# the benchmark. Logs go to ./gpu-out and are re-packed into $OUT/logs.tgz after every step.
#   plugins/flashinfer_backend/scripts/gpu_check.sh            (from the repository root)
# STEPS (default "install doctor tests bench") picks steps; PRESETS and TOKENS shape the benchmark.
set -u
wheels=${WHEELS:-.wheels .wheels2}  # space-separated folders
out=gpu-out
mkdir -p "$out"
export PYTHONUNBUFFERED=1
site=/tmp/fi-site
# A CUDA 13.4 tree for cuTile: tileiras loads $CUDA_HOME/lib/libnvvm.so.4 (cuda.tile passes CUDA_HOME,
# and the image's 13.0 libnvvm fails on tileiras' IR) and runs the first ptxas on PATH.
cu13=$site/cu13
step() { local limit=$1 name=$2; shift 2; echo "== $name (limit ${limit}s)"; local t0=$SECONDS
         timeout "$limit" "$@" > "$out/$name.log" 2>&1; echo "   rc=$? in $((SECONDS - t0))s"; tail -n 6 "$out/$name.log"
         if [[ -n ${OUT:-} ]]; then tar czf "$OUT/logs.tgz" -C "$out" .; fi; }
install() {  # every folder of WHEELS: wheels, the trimmed FlashInfer tree, and the compiler binaries
    local dir
    for dir in $wheels; do
        if compgen -G "$dir/*.whl" > /dev/null; then
            python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$site" "$dir"/*.whl || return 1
        fi
        [[ -f $dir/flashinfer-trim.tar.xz ]] && { tar xJf "$dir/flashinfer-trim.tar.xz" -C "$site" || return 1; }
        # tileiras and ptxas of CUDA 13.4 (the image's 13.0 ptxas rejects tileiras' PTX), libnvvm beside them (lib/)
        for tool in tileiras ptxas; do
            [[ -f $dir/$tool.xz ]] && { mkdir -p "$cu13/bin" && xz -dc "$dir/$tool.xz" > "$cu13/bin/$tool" && chmod +x "$cu13/bin/$tool"; }
        done
        [[ -f $dir/libnvvm.so.4.xz ]] && { mkdir -p "$cu13/lib" && xz -dc "$dir/libnvvm.so.4.xz" > "$cu13/lib/libnvvm.so.4"; }
    done
    python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend -e plugins/flashinfer_backend
}
export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH} PATH=$cu13/bin:$PATH CUDA_HOME=$cu13
steps=${STEPS:-install doctor tests bench}
[[ $steps == *install* ]] && { echo "== install"; install > "$out/install.log" 2>&1; echo "   rc=$?"; tail -n 6 "$out/install.log"; }
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import sys, torch, triton, flashinfer, importlib.metadata as m; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__, 'flashinfer', flashinfer.__version__, 'cuda-tile', m.version('cuda-tile'))"
  tileiras --version 2>&1 | tail -1; nvcc --version | tail -1; } > "$out/env.txt" 2>&1; cat "$out/env.txt"
if [[ $steps == *doctor* ]]; then
    step 60 fi_doctor python3 -m moe_core_flashinfer
    step 30 doctor moe-core doctor
fi
[[ $steps == *tests* ]] && step ${TEST_LIMIT:-200} gpu_tests python3 -m pytest -v -rA -p no:cacheprovider plugins/flashinfer_backend/tests/test_flashinfer_gpu.py
if [[ $steps == *bench* ]]; then
    for preset in ${PRESETS:-qwen3-30b-a3b mixtral-8x7b}; do
        step ${BENCH_LIMIT:-150} "bench_$preset" moe-core bench --preset $preset --scheme ${SCHEME:-unquantized} \
            --backends flashinfer_cutile,triton --tokens ${TOKENS:-1,16,64,256,1024,4096,16384} \
            --json "$out/bench_$preset.json" --write-ranking "$out/ranking_$preset.json"
    done
    cat "$out"/bench_*.log | grep -v '^\s*$' | tail -n 60
fi
