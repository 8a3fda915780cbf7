#!/usr/bin/env bash
# Sets up .venv for moe-core on a fresh machine; safe to run again (it only adds what is missing).
# Used by scripts/main.sh and scripts/test.sh, so both README commands work on a clean clone.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
venv="${MOE_CORE_VENV:-$root/.venv}"
python="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
py="$venv/bin/python"
pip=("$py" -m pip install --quiet --disable-pip-version-check)
# CPU torch: a bare `torch` requirement would pull a multi-GB CUDA build, so pin the CPU wheel
# when (and only when) the environment has no torch at all.
if ! "$py" -c "import torch" >/dev/null 2>&1; then
  "${pip[@]}" "torch==2.13.0"
fi
shopt -s nullglob
packages=(plugins/*/pyproject.toml examples/*/pyproject.toml)
stamp="$venv/.moe-core-installed"
want="$(cat pyproject.toml "${packages[@]}" requirements-test.txt | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  editable=(-e .)
  for project in "${packages[@]}"; do
    editable+=(-e "$(dirname "$project")")
  done
  "${pip[@]}" "${editable[@]}"
  "${pip[@]}" -r requirements-test.txt
  echo "$want" > "$stamp"
fi
