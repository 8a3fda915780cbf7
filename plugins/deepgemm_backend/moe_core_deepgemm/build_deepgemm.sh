#!/usr/bin/env bash
# Build DeepGEMM from an upstream source tree and install it (or write a wheel) for this Python.
#
#   build_deepgemm.sh SOURCE_DIR [--wheel OUT_DIR]
#
# SOURCE_DIR is a checkout of github.com/deepseek-ai/DeepGEMM with its two submodules present
# (third-party/cutlass and third-party/fmt; only their include/ folders are needed), e.g.
#   git clone --recursive https://github.com/deepseek-ai/DeepGEMM && git -C DeepGEMM checkout 54e2261
# The source is copied to a temporary folder first, so the tree you point at stays untouched.
#
# Compiler: the extension must be built by the GCC that built Python and torch's libstdc++. A
# different g++ first on PATH builds an extension that segfaults at its first GEMM (seen on the
# H100 image, 2026-11-22, whose environment sets CXX=/opt/gcc/bin/g++), so /usr/bin/g++ and
# /usr/bin/gcc are used when they exist, whatever CXX/CC say; set DEEPGEMM_CXX/DEEPGEMM_CC to override.
# CUDA_HOME (or nvcc on PATH) must point at a CUDA 12.3+ toolkit: DeepGEMM compiles its
# kernels with nvcc at run time, too.
set -euo pipefail

src=${1:?usage: build_deepgemm.sh SOURCE_DIR [--wheel OUT_DIR]}
wheel_dir=""
if [[ ${2:-} == --wheel ]]; then wheel_dir=${3:?--wheel needs an output folder}; fi
python=${PYTHON:-python3}

for f in deep_gemm/__init__.py csrc/python_api.cpp third-party/cutlass/include/cute third-party/fmt/include/fmt; do
    [[ -e $src/$f ]] || { echo "error: $src/$f is missing: point at a DeepGEMM tree with its submodules" >&2; exit 2; }
done
[[ -x /usr/bin/g++ ]] && export CXX=/usr/bin/g++
[[ -x /usr/bin/gcc ]] && export CC=/usr/bin/gcc
export CXX=${DEEPGEMM_CXX:-${CXX:-g++}} CC=${DEEPGEMM_CC:-${CC:-gcc}}
export DG_USE_LOCAL_VERSION=0  # no "+<git hash>" suffix: the copy is not a git checkout
export MAX_JOBS=${MAX_JOBS:-$(nproc)}

build=$(mktemp -d "${TMPDIR:-/tmp}/deepgemm-build.XXXXXX")
trap 'rm -rf "$build"' EXIT
cp -r "$src"/. "$build"/
cd "$build"
echo "building DeepGEMM $(grep -Po "__version__ = '\K[^']+" deep_gemm/__init__.py) with CXX=${CXX:-g++}"
if [[ -n $wheel_dir ]]; then
    "$python" -m pip wheel --no-deps --no-build-isolation -w "$wheel_dir" .
else
    "$python" -m pip install --no-deps --no-build-isolation .
fi
