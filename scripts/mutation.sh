#!/usr/bin/env bash
# Mutation testing of moe-core's numerics and selection code with mutmut 3 (not part of CI: minutes per target).
#
#   scripts/mutation.sh [target ...]     targets: quantization reference routing_guard resolver pair dispatch triton_host
#                                        (default: all); MUTMUT_CHILDREN=2 parallel workers (default 2)
#
# Each target runs in a scratch copy (mutmut writes a mutants/ tree next to the code), against the fast tests
# that exercise it, and prints: killed/total, the score, and the surviving mutants with their diffs.
# mutmut imports the code from mutants/, so the Triton plugin's package is copied to the top level there;
# workers fork from a server that never ran the tests (torch is not fork-safe once its threads started).
# Needs mutmut in the environment: pip install mutmut==3.8.1.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
children="${MUTMUT_CHILDREN:-2}"
command -v mutmut >/dev/null || { echo "mutation.sh: mutmut not found; pip install mutmut==3.8.1 (or run with the venv's bin on PATH)" >&2; exit 2; }

declare -A FILES TESTS
FILES[quantization]="moe_core/quantization/*"
TESTS[quantization]="tests/test_quantization.py tests/test_reference.py"
FILES[reference]="moe_core/reference/*"
TESTS[reference]="tests/test_reference.py"
FILES[routing_guard]="moe_core/routing_guard.py"
TESTS[routing_guard]="tests/test_routing_guard.py"
FILES[resolver]="moe_core/resolver.py"
TESTS[resolver]="tests/test_resolver_explanations.py tests/test_resolver.py tests/test_resolver_properties.py tests/test_registry.py tests/test_ranking_sources.py tests/test_bench_and_ranking.py tests/parity/test_parity.py"
FILES[pair]="moe_core/pair.py"
TESTS[pair]="tests/test_pair_selection.py tests/test_pair_properties.py tests/test_ep_ranking.py"
FILES[dispatch]="moe_core/dispatch/token_rows.py moe_core/dispatch/fp8_rows.py moe_core/dispatch/ranking.py moe_core/dispatch/overlap.py"
TESTS[dispatch]="tests/test_ep_dispatchers.py tests/test_ep_ranking.py tests/test_ep_overlap.py"
FILES[triton_host]="moe_core_triton/launch.py moe_core_triton/configs.py"
TESTS[triton_host]="triton_tests/test_triton_launch.py triton_tests/test_triton_direct_launch.py triton_tests/test_triton_configs.py"

targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(quantization reference routing_guard resolver pair dispatch triton_host)

for target in "${targets[@]}"; do
  [ -n "${FILES[$target]:-}" ] || { echo "unknown target $target; valid: ${!FILES[*]}" >&2; exit 2; }
  work="$(mktemp -d -t moe-mutation.XXXXXX)"
  cp -r "$repo/moe_core" "$repo/tests" "$work/"
  cp -r "$repo/plugins/triton_backend/moe_core_triton" "$work/"
  cp -r "$repo/plugins/triton_backend/tests" "$work/triton_tests"
  only=""
  for f in ${FILES[$target]}; do only+="    $f"$'\n'; done
  selection=""
  for t in ${TESTS[$target]}; do selection+="    $t"$'\n'; done
  cat > "$work/setup.cfg" <<EOF
[mutmut]
source_paths =
    moe_core
    moe_core_triton
only_mutate =
$only
pytest_add_cli_args_test_selection =
$selection
pytest_add_cli_args =
    -p
    no:cacheprovider
    -x
    -q
also_copy =
    triton_tests
process_isolation = forkserver
EOF
  echo "== $target: mutating ${FILES[$target]} against ${TESTS[$target]} ($(cd "$work" && python -c 'import mutmut; print("mutmut", mutmut.__version__)' 2>/dev/null || echo mutmut))"
  (cd "$work" && env -u PYTHONPATH TRITON_INTERPRET=1 OMP_NUM_THREADS=1 mutmut run --max-children "$children" > run.log 2>&1 || true)
  (cd "$work" && env -u PYTHONPATH mutmut results --all true > results.txt 2>&1 || true)
  total=$(grep -cE ': (killed|survived|no tests|timeout|suspicious|segfault|skipped)' "$work/results.txt" || true)
  killed=$(grep -cE ': (killed|timeout|segfault)' "$work/results.txt" || true)
  echo "killed $killed of $total ($(python -c "print(f'{100 * $killed / max($total, 1):.1f}%')"))"
  grep -E ': no tests' "$work/results.txt" | sed 's/^/--- /' || true
  grep -E ': survived' "$work/results.txt" | while read -r line; do
    name="${line%%:*}"
    echo "--- $line"
    (cd "$work" && env -u PYTHONPATH mutmut show "$name" </dev/null 2>/dev/null | grep -E '^[-+][^-+]' || true)
  done
  [ -n "${KEEP:-}" ] && echo "kept $work" || rm -rf "$work"
done
