"""In-process A/B of the eager forward: this session's start (moe_core_triton_old = 8899157) against now,
interleaved batches of back-to-back calls in one process (issue 12, the 1-token host path)."""
import statistics, sys, time, torch
from moe_core.presets import model, random_inputs, random_layer
from moe_core.quant import scheme
import moe_core_triton.kernel as new
import moe_core_triton_old.kernel as old
cfg = model("qwen3-30b-a3b").config()
def batch(fn, n=100):
    torch.cuda.synchronize(); s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(n): fn()
    e.record(); e.synchronize(); return s.elapsed_time(e) / n * 1e3
for name in ("unquantized", "fp8-block", "fp8-channel"):
    sch = scheme(name); raw = random_layer(cfg, sch, device="cuda")
    ks = {v: m.TritonKernel(cfg, *sch.keys) for v, m in (("old", old), ("new", new))}
    ws = {v: k.prepare_weights(raw) for v, k in ks.items()}
    for tokens in (1, 16, 64):
        x, r = random_inputs(cfg, tokens, device="cuda")
        fns = {v: (lambda k=ks[v], w=ws[v]: k.apply(x, w, r)) for v in ks}
        for f in fns.values(): batch(f, 20)
        t = {v: [] for v in fns}
        for _ in range(11):
            for v, f in fns.items(): t[v].append(batch(f))
        print(f"{name:12s} {tokens:3d} tok  old {statistics.median(t['old']):6.1f} us  new {statistics.median(t['new']):6.1f} us  "
              f"(old min/max {min(t['old']):.0f}/{max(t['old']):.0f}, new {min(t['new']):.0f}/{max(t['new']):.0f})", flush=True)
