"""Speed-up of each weight-only scheme over bf16 Triton in the same bench run (graph time), and % of the HBM roofline,
from moe-core bench --json files: python ratios.py wo5.json [gptoss5.json ...]"""
import json, sys
for path in sys.argv[1:]:
    times = {}
    for case in json.load(open(path))["cases"]:
        preset, scheme = case["label"].split(" ", 1)
        for row in case["rows"]:
            if row["status"] == "ok" and row["backend"] == "triton":
                times[(preset, scheme, row["tokens"])] = (row["time_s"], row["pct_copy"])
    for (preset, scheme, tokens), (t, pct) in sorted(times.items()):
        if scheme != "unquantized":
            bf16 = times[(preset, "unquantized", tokens)][0]
            print(f"{preset:14s} {scheme:16s} {tokens:5d}  {bf16 / t:5.2f}x  {pct:5.1f}%  ({t * 1e6:.1f} vs bf16 {bf16 * 1e6:.1f} us)")
