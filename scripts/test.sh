#!/usr/bin/env bash
# The test suite: set up .venv if needed, then run every test of the core, the plugins and the examples.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/bootstrap.sh"
cd "$root"
exec "$root/.venv/bin/python" -m pytest -q "$@"
