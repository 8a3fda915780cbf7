#!/usr/bin/env bash
# The test suite: set up the venv if needed (scripts/bootstrap.sh), then run every test of the core,
# the plugins and the examples. On a CUDA GPU the Triton kernels run compiled (bfloat16 included);
# without one, in the Triton interpreter.
#
# Where pytest-xdist is installed and the machine has 4 or more cores (a GPU machine's image), the tests
# run in parallel, one worker a core up to 16, unless the arguments already say how (-n / --numprocesses /
# -p no:xdist). Without it (CPU CI: 2 cores, no xdist) they run in one process.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash "$root/scripts/bootstrap.sh"
py="${MOE_CORE_VENV:-$root/.venv}/bin/python"
workers=()
if ! printf '%s\n' "$@" | grep -qE '^(-n|--numprocesses|--dist|no:xdist)'; then
  cores="$(nproc)"
  if [ "$cores" -ge 4 ] && "$py" -c "import xdist" >/dev/null 2>&1; then
    # worksteal: an idle worker takes tests queued on a busy one, so a few long GPU tests do not make the tail.
    workers=(-n "$(( cores < 16 ? cores : 16 ))" --dist worksteal)
  fi
fi
exec env -u MOE_CORE_TORCH -u MOE_CORE_VENV "$py" -m pytest -q "${workers[@]}" "$@"
