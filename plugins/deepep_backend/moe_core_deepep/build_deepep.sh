#!/usr/bin/env bash
# Build DeepEP V1 from an upstream source tree and install it (or write a wheel) for this Python,
# against the installed torch.
#
#   build_deepep.sh SOURCE_DIR [--wheel OUT_DIR]
#
# SOURCE_DIR is a checkout of github.com/deepseek-ai/DeepEP at the V1 tag this plugin binds (1.8 MB):
#   git clone https://github.com/deepseek-ai/DeepEP && git -C DeepEP checkout v1.2.1   # 9af0e0d
# Its main branch is V2 (ElasticBuffer, NCCL >= 2.30.4), which this plugin does not bind.
# The source is copied to a temporary folder first, so the tree you point at stays untouched.
#
# NVSHMEM (needed by the low-latency mode, deepep_low_latency): DeepEP's setup.py takes NVSHMEM_DIR, else
# the nvidia-nvshmem wheel (torch 2.11+cu130 installs nvidia-nvshmem-cu13); with neither, it builds the
# intranode normal mode (deepep) alone. TORCH_CUDA_ARCH_LIST defaults to 9.0 (Hopper); for sm_80, set
# DISABLE_SM90_FEATURES=1 (normal mode only, and no NVSHMEM may be found: unset NVSHMEM_DIR).
# Compiler: the GCC that built Python and torch's libstdc++ (/usr/bin/g++ when present, whatever CXX
# says; DEEPEP_CXX/DEEPEP_CC override), as for the DeepGEMM plugin's build.
set -euo pipefail

src=${1:?usage: build_deepep.sh SOURCE_DIR [--wheel OUT_DIR]}
wheel_dir=""
if [[ ${2:-} == --wheel ]]; then
    wheel_dir=${3:?--wheel needs an output folder}
    wheel_dir=$(mkdir -p "$wheel_dir" && cd "$wheel_dir" && pwd)  # absolute: the build runs in a copy elsewhere
fi
python=${PYTHON:-python3}

for f in setup.py deep_ep/buffer.py csrc/deep_ep.cpp csrc/kernels/intranode.cu; do
    [[ -e $src/$f ]] || { echo "error: $src/$f is missing: point at a DeepEP V1 tree (tag v1.2.1)" >&2; exit 2; }
done
[[ -x /usr/bin/g++ ]] && export CXX=/usr/bin/g++
[[ -x /usr/bin/gcc ]] && export CC=/usr/bin/gcc
export CXX=${DEEPEP_CXX:-${CXX:-g++}} CC=${DEEPEP_CC:-${CC:-gcc}}
export MAX_JOBS=${MAX_JOBS:-$(nproc)}
# CUDA 13 keeps libcu++ (cuda/std/...) under include/cccl: nvcc finds it, the host compiler of deep_ep.cpp (which
# includes NVSHMEM's headers, which include cuda/std/tuple) does not.
cuda_home=${CUDA_HOME:-/usr/local/cuda}
if [[ -d $cuda_home/include/cccl ]]; then export CPLUS_INCLUDE_PATH=$cuda_home/include/cccl${CPLUS_INCLUDE_PATH:+:$CPLUS_INCLUDE_PATH}; fi
if [[ -z ${NVSHMEM_DIR:-} ]]; then
    if nvshmem=$("$python" -c "import nvidia.nvshmem as m; print(list(m.__path__)[0])" 2>/dev/null); then
        echo "NVSHMEM: the wheel at $nvshmem (low-latency mode included)"
    else
        echo "NVSHMEM: not found (pip install nvidia-nvshmem-cu13 or set NVSHMEM_DIR): normal mode only"
    fi
else
    echo "NVSHMEM: NVSHMEM_DIR=$NVSHMEM_DIR (low-latency mode included)"
fi

build=$(mktemp -d "${TMPDIR:-/tmp}/deepep-build.XXXXXX")
trap 'rm -rf "$build"' EXIT
cp -r "$src"/. "$build"/
cd "$build"
version=$(grep -Po "version=.\K[0-9.]+" setup.py || echo unknown)
echo "building DeepEP $version with CXX=$CXX, TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0, the default of DeepEP}"
if [[ -n $wheel_dir ]]; then
    "$python" -m pip wheel --no-deps --no-build-isolation -w "$wheel_dir" .
else
    "$python" -m pip install --no-deps --no-build-isolation .
fi
