"""In-process A/B of one forward: the plugin before (moe_core_triton_old: HEAD ea3a4e4) against now. Interleaved
batches of back-to-back eager calls in one process, then CUDA-graph replays of both (20 forwards per graph),
interleaved; medians of 11 batches, microseconds per forward. Run with the old package's folder on PYTHONPATH.

    inproc_ab.py [quant_in]   issue 12: eager forwards of few pairs quantize their activations inside the GEMMs
    inproc_ab.py int4         issue 13: int4 decode tiles built from the codes' bits (bf16 in the same process)
    inproc_ab.py prefill      issue 13: integer codes of prefill tiles made float32 by their bits (batches of 10
                              forwards, graphs of 2 at 1024 tokens and more)
"""
import statistics, sys, torch
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
    return g.replay, n


CASES = {
    "quant_in": [("qwen3-30b-a3b", s, t) for s in ("unquantized", "fp8-block", "fp8-channel", "int8") for t in (1, 4, 8)]
    + [("mixtral-8x7b", s, t) for s in ("fp8-block", "fp8-channel") for t in (1, 16, 32)],
    "int4": [(p, s, t) for p in ("qwen3-30b-a3b", "mixtral-8x7b") for s in ("unquantized", "w4a16", "w4a16-zp") for t in (1, 16, 64)],
    "prefill": [(p, s, t) for p in ("qwen3-30b-a3b", "mixtral-8x7b") for s in ("unquantized", "w4a16", "w8a16", "w8a16-zp")
                for t in (16, 1024, 4096)],
}
cases = CASES[sys.argv[1] if len(sys.argv) > 1 else "quant_in"]
print("case | eager old | eager new | graph old | graph new | output new vs old  (us per forward, medians of 11 interleaved batches)")
for preset, name, tokens in cases:
    cfg = model(preset).config()
    sch = scheme(name); raw = random_layer(cfg, sch, device="cuda")
    ks = {v: m.TritonKernel(cfg, *sch.keys) for v, m in (("old", old), ("new", new))}
    ws = {v: k.prepare_weights(raw) for v, k in ks.items()}
    x, r = random_inputs(cfg, tokens, device="cuda")
    fns = {v: (lambda k=ks[v], w=ws[v]: k.apply(x, w, r)) for v in ks}
    outs = {v: f() for v, f in fns.items()}
    diff = (outs["new"].float() - outs["old"].float()).abs().max().item()
    same = "identical" if torch.equal(outs["old"], outs["new"]) else f"max |diff| {diff:.3g} (max |old| {outs['old'].float().abs().max().item():.3g})"
    reps, per_graph = (100, 20) if tokens <= 64 else (10, 2)
    for f in fns.values(): batch(f, reps // 5)
    t = {v: [] for v in fns}
    for _ in range(11):
        for v, f in fns.items(): t[v].append(batch(f, reps))
    graphs = {v: graph_of(f, per_graph) for v, f in fns.items()}
    gt = {v: [] for v in fns}
    for _ in range(11):
        for v, (replay, n) in graphs.items(): gt[v].append(batch(replay, 5) / n)
    m = {v: statistics.median(x) for v, x in t.items()}; gm = {v: statistics.median(x) for v, x in gt.items()}
    print(f"{preset} {name} {tokens} tok | {m['old']:6.1f} | {m['new']:6.1f} | {gm['old']:6.1f} | {gm['new']:6.1f} | {same}", flush=True)
