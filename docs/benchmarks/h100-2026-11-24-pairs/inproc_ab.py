"""In-process A/B of the eager forward: the session's start (moe_core_triton_old = 6cfc621) against now (PairTable
forwards of <= 128 pairs), interleaved batches of back-to-back calls in one process; then CUDA-graph device time
of both, interleaved (issue 12)."""
import statistics, sys, time, torch
from moe_core.presets import model, random_inputs, random_layer
from moe_core.quant import scheme
import moe_core_triton.kernel as new
import moe_core_triton_old.kernel as old

def batch(fn, n=100):
    torch.cuda.synchronize(); s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(n): fn()
    e.record(); e.synchronize(); return s.elapsed_time(e) / n * 1e3

def graph_of(fn, n=20):
    side = torch.cuda.Stream(); side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(n): fn()
    return lambda: g.replay(), n

cases = [("qwen3-30b-a3b", s, t) for s in ("unquantized", "fp8-block", "fp8-channel", "w4a16") for t in (1, 8, 16)]
cases += [("mixtral-8x7b", s, t) for s in ("unquantized", "fp8-block") for t in (1, 32, 64)]
print("case | eager old | eager new | graph old | graph new  (us per forward, medians of 11 interleaved batches)")
for preset, name, tokens in cases:
    cfg = model(preset).config()
    sch = scheme(name); raw = random_layer(cfg, sch, device="cuda")
    ks = {v: m.TritonKernel(cfg, *sch.keys) for v, m in (("old", old), ("new", new))}
    ws = {v: k.prepare_weights(raw) for v, k in ks.items()}
    x, r = random_inputs(cfg, tokens, device="cuda")
    fns = {v: (lambda k=ks[v], w=ws[v]: k.apply(x, w, r)) for v in ks}
    outs = {v: f() for v, f in fns.items()}
    same = torch.equal(outs["old"], outs["new"])
    for f in fns.values(): batch(f, 20)
    t = {v: [] for v in fns}
    for _ in range(11):
        for v, f in fns.items(): t[v].append(batch(f))
    graphs = {v: graph_of(f) for v, f in fns.items()}
    gt = {v: [] for v in fns}
    for _ in range(11):
        for v, (replay, n) in graphs.items(): gt[v].append(batch(replay, 5) / n)
    m = {v: statistics.median(x) for v, x in t.items()}; gm = {v: statistics.median(x) for v, x in gt.items()}
    print(f"{preset} {name} {tokens} tok | {m['old']:6.1f} | {m['new']:6.1f} | {gm['old']:6.1f} | {gm['new']:6.1f} | identical output: {same}", flush=True)
