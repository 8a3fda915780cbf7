#!/usr/bin/env bash
# The main job: set up the venv if needed (scripts/bootstrap.sh), then select a backend for a
# Qwen3-30B-A3B-shaped MoE layer and run one forward on the best available backend: Triton on a
# CUDA GPU, the reference backend on a CPU-only machine.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# The example vendor plugin (examples/oot_plugin) is installed for the tests; the main job leaves it
# out unless the caller says otherwise, so a CPU machine runs the built-in reference backend.
export MOE_CORE_PLUGINS_DENY="${MOE_CORE_PLUGINS_DENY-acme-moe}"
exec bash "$root/scripts/bootstrap.sh" moe-core run --preset qwen3-30b-a3b --tokens "${TOKENS:-16}" "$@"
