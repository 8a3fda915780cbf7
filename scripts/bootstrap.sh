#!/usr/bin/env bash
# Sets up the venv for moe-core on a fresh machine, then runs COMMAND from the venv's bin/ if given:
#   scripts/bootstrap.sh [COMMAND [ARGS...]]        e.g. scripts/bootstrap.sh moe-core doctor
# Safe to run again: it only adds what is missing, and reinstalls the projects when a pyproject.toml
# or requirements-test.txt changes. Used by scripts/main.sh and scripts/test.sh.
#   MOE_CORE_VENV   the venv's directory (default: .venv in the repository)
#   PYTHON          the Python the venv starts from (default: python3)
#   MOE_CORE_TORCH  auto | system | cpu: reuse that Python's torch, or install the CPU wheel
#                   (decided once, when the venv is created: scripts/prepare_venv.py says how)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${MOE_CORE_VENV:-$root/.venv}"
mode="$("${PYTHON:-python3}" "$root/scripts/prepare_venv.py" "$venv")"
py="$venv/bin/python"
pip=("$py" -m pip install --quiet --disable-pip-version-check)
if [ "$mode" = system ]; then
  # torch, pip and setuptools are the starting Python's: build the projects with them, download nothing.
  pip+=(--no-build-isolation)
elif ! "$py" -c "import torch" >/dev/null 2>&1; then
  # CPU torch: a bare `torch` requirement would pull a multi-GB CUDA build, so pin the CPU wheel. Triton is pinned
  # to the GPU image's release, whose Gluon API the sm_90 kernels are written for (a newer one skips their compile
  # checks), and numpy below 2.4, whose scalars triton 3.6's interpreter cannot convert.
  "${pip[@]}" "torch==2.13.0" "triton==3.6.0" "numpy<2.4"
fi
shopt -s nullglob
packages=("$root"/plugins/*/pyproject.toml "$root"/examples/*/pyproject.toml)
light=("$root"/plugins/*/requirements-light.txt "$root"/plugins/*/requirements-nodeps.txt)
stamp="$venv/.moe-core-installed"
want="$(cat "$root/pyproject.toml" "${packages[@]}" "${light[@]}" "$root/requirements-test.txt" | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  # Test requirements first: they bring setuptools>=68, which --no-build-isolation builds with.
  "${pip[@]}" -r "$root/requirements-test.txt"
  editable=(-e "$root")
  nodeps=()
  for project in "${packages[@]}"; do
    dir="$(dirname "$project")"
    if [ -f "$dir/requirements-nodeps.txt" ]; then
      # A plugin whose provider declares heavy GPU-only dependencies (plugins/flashinfer_backend: ~300 MB
      # that `import flashinfer` does not need): its light requirements and the provider without them.
      # Offline (a GPU machine's image) the provider may be out of reach: the plugin is installed all the
      # same and its backends say how to install the provider, as for every optional provider.
      # One try each, no retries: an unreachable index fails in seconds instead of pip's five backed-off retries.
      # pip's own messages go to a log; the outcome is one line.
      log="$venv/provider-$(basename "$dir").log"
      once=("${pip[@]}" --retries 0 --timeout 10)
      if ! { "${once[@]}" -r "$dir/requirements-light.txt" && "${once[@]}" --no-deps -r "$dir/requirements-nodeps.txt"; } >"$log" 2>&1; then
        echo "bootstrap: could not install the provider of $(basename "$dir") ($dir/requirements-nodeps.txt; offline? pip's output: $log)." \
             "Its backends will say how to install it; the rest works without it. To retry: rm $stamp" >&2
      fi
      nodeps+=(-e "$dir")
    else
      editable+=(-e "$dir")
    fi
  done
  "${pip[@]}" "${editable[@]}"
  if [ ${#nodeps[@]} -gt 0 ]; then "${pip[@]}" --no-deps "${nodeps[@]}"; fi
  echo "$want" > "$stamp"
fi
if [ $# -gt 0 ]; then
  # The set-up variables are not moe-core's own: it would warn about MOE_CORE_* names it does not read.
  exec env -u MOE_CORE_TORCH -u MOE_CORE_VENV "$venv/bin/$1" "${@:2}"
fi
