"""Issue 12's targets read from one `moe-core bench --json` file of its command (session 44):
    python i12_targets.py i12.json [deepseek.json]"""
import json, sys

cases = {c["label"]: {(r["backend"], r["tokens"]): r for r in c["rows"]} for c in json.load(open(sys.argv[1]))["cases"]}
over_idle, over_b2b, over_cold, n = [], [], [], 0
for label, rows in cases.items():
    for (backend, tokens), r in rows.items():
        if backend != "triton" or r["status"] != "ok":
            continue
        n += 1
        idle = (r["idle_time_s"] - r["graph_idle_time_s"]) * 1e6
        if idle > 40:
            over_idle.append(f"{label} {tokens}: {idle:.1f}")
        if (r["eager_time_s"] - r["graph_b2b_time_s"]) * 1e6 > 40:
            over_b2b.append(f"{label} {tokens}: {(r['eager_time_s'] - r['graph_b2b_time_s']) * 1e6:+.1f}")
        if (r["eager_time_s"] - r["time_s"]) * 1e6 > 40:
            over_cold.append(f"{label} {tokens}: {(r['eager_time_s'] - r['time_s']) * 1e6:+.1f}")
worst = max(((r["idle_time_s"] - r["graph_idle_time_s"]) * 1e6, l, t) for l, rows in cases.items() for (b, t), r in rows.items()
            if b == "triton" and r["status"] == "ok")
print(f"eager target: idle e - g <= 40 us in {n - len(over_idle)} of {n} (largest {worst[0]:.1f}: {worst[1]} {worst[2]}); over: {over_idle}")
print(f"  eager <= graph b2b + 40 in {n - len(over_b2b)} of {n}; over: {over_b2b}")
print(f"  eager <= cold replay + 40 in {n - len(over_cold)} of {n}; over: {over_cold}")
q1 = cases["qwen3-30b-a3b unquantized"][("triton", 1)]
print(f"1-token Qwen3 bf16: {q1['time_s'] * 1e6:.1f} us, {q1['pct_copy']:.1f}% of the copy roofline (target 80%)")
m = cases["mixtral-8x7b unquantized"]
t, p = m[("triton", 4096)], m[("torch_grouped_mm", 4096)]
print(f"Mixtral bf16 4096 vs torch._grouped_mm: {p['time_s'] / t['time_s']:.3f}x graph ({t['time_s'] * 1e6:.1f} vs {p['time_s'] * 1e6:.1f} us), "
      f"{p['eager_time_s'] / t['eager_time_s']:.3f}x eager (target 1.05x)")
for preset in ("qwen3-30b-a3b", "mixtral-8x7b"):
    bf = cases[f"{preset} unquantized"][("triton", 4096)]["time_s"]
    for s in ("fp8-block", "fp8-channel"):
        q = cases[f"{preset} {s}"][("triton", 4096)]["time_s"]
        print(f"{preset} {s} vs bf16 at 4096: {bf / q:.3f}x ({q * 1e6:.1f} vs {bf * 1e6:.1f} us)")
if len(sys.argv) > 2:
    for c in json.load(open(sys.argv[2]))["cases"]:
        for r in c["rows"]:
            print(f"{c['label']} {r['tokens']}: {r['tflops']:.1f} TFLOP/s graph ({r['time_s'] * 1e6:.1f} us), "
                  f"{r['flops'] / r['eager_time_s'] / 1e12:.1f} eager (target 700)")
