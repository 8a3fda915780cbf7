"""The issue-12 eager table from a before and an after bench JSON of one call: graph, eager and host per case (µs)."""
import json, sys


def rows(path):
    out = {}
    for case in json.load(open(path))["cases"]:
        for r in case["rows"]:
            if r["backend"] == "triton" and r["status"] == "ok":
                out[(case["label"], r["tokens"])] = r
    return out


before, after = rows(sys.argv[1]), rows(sys.argv[2])
print("| case | tokens | graph before | graph after | eager before | eager after | eager − graph before | eager − graph after | ≤ +40 after | host before | host after |")
print("|---|---:|---:|---:|---:|---:|---:|---:|:-:|---:|---:|")
misses = 0
for key, a in after.items():
    b = before[key]
    us = lambda r, f: r[f] * 1e6  # noqa: E731
    gap_b, gap_a = us(b, "eager_time_s") - us(b, "time_s"), us(a, "eager_time_s") - us(a, "time_s")
    ok = gap_a <= 40
    misses += not ok
    print(f"| {key[0]} | {key[1]} | {us(b, 'time_s'):.1f} | {us(a, 'time_s'):.1f} | {us(b, 'eager_time_s'):.1f} | {us(a, 'eager_time_s'):.1f} "
          f"| {gap_b:+.0f} | {gap_a:+.0f} | {'yes' if ok else '**no**'} | {us(b, 'host_time_s'):.1f} | {us(a, 'host_time_s'):.1f} |")
print(f"\n{len(after) - misses} of {len(after)} cases within graph + 40 µs after")
