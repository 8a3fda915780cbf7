#!/usr/bin/env bash
# The test suite: set up the venv if needed (scripts/bootstrap.sh), then run every test of the core,
# the plugins and the examples. On a CUDA GPU the Triton kernels run compiled (bfloat16 included);
# without one, in the Triton interpreter.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
exec bash "$root/scripts/bootstrap.sh" python -m pytest -q "$@"
