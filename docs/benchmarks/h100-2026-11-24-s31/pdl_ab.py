"""In-process A/B of GEMM2 as a programmatic dependent launch of GEMM1 (session 31): the same layer, weights and
inputs with ``TritonKernel.programmatic_launch`` off and on, alternated. Per case, microseconds per forward (medians):
  graph: one forward's CUDA graph, the L2 emptied by reading 256 MB before each replay (decode_timing.py: `read`);
  layers: a CUDA graph of L forwards, each routed to experts the others do not touch, per forward;
  eager: forwards called back to back.
Outputs of both are compared bit for bit.

    python pdl_ab.py [noprefetch]     noprefetch: GEMM2 waits without having the L2 fetch its weights first
"""
import statistics, sys, torch, triton, triton.language as tl
import moe_core_triton.gemm as gemm

if "noprefetch" in sys.argv:
    @triton.jit
    def _no_prefetch(row_ptrs, row_ok, row_bytes):
        pass
    gemm.prefetch_rows = _no_prefetch  # resolved when the GEMM first compiles in this process

from moe_core.presets import model, random_inputs, random_layer
from moe_core.quant import scheme
from moe_core_triton.kernel import TritonKernel
sys.path.insert(0, __file__.rsplit("/", 1)[0])
from decode_timing import FLUSH, batch, disjoint_routings, events_median, graph  # noqa: E402

CASES = [("qwen3-30b-a3b", "unquantized", t) for t in (1, 4, 16, 64, 1024, 4096)] + \
        [("qwen3-30b-a3b", s, t) for s in ("w4a16", "fp8-channel", "fp8-block", "mxfp4") for t in (1, 16)] + \
        [("mixtral-8x7b", "unquantized", 1), ("mixtral-8x7b", "unquantized", 16), ("mixtral-8x7b", "w4a16", 1)]
print(f"variant: {'no prefetch' if 'noprefetch' in sys.argv else 'prefetch'}; us per forward, off -> on")
print("case | graph (read flush) | layers graph | eager | outputs")
for preset, name, tokens in CASES:
    cfg = model(preset).config(); sch = scheme(name)
    raw = random_layer(cfg, sch, device="cuda")
    ks = {}
    for v in ("off", "on"):
        k = TritonKernel(cfg, *sch.keys); k.programmatic_launch = v == "on"; ks[v] = (k, k.prepare_weights(raw))
    x, r = random_inputs(cfg, tokens, device="cuda", seed=tokens)
    outs = {v: k.apply(x, w, r) for v, (k, w) in ks.items()}
    same = "identical" if torch.equal(outs["off"], outs["on"]) else f"DIFFER max {(outs['off'].float() - outs['on'].float()).abs().max().item():.3g}"
    layers = max(1, min(16, cfg.num_experts // (tokens * cfg.top_k))) if tokens * cfg.top_k <= cfg.num_experts else (8 if tokens <= 64 else 2)
    routes = disjoint_routings(cfg, tokens, layers)
    xs = [torch.randn(tokens, cfg.hidden_size, device="cuda", dtype=cfg.dtype) for _ in routes]
    g1 = {v: graph(lambda j, k=k, w=w: k.apply(x, w, r)) for v, (k, w) in ks.items()}
    gl = {v: graph(lambda j, k=k, w=w: k.apply(xs[j], w, routes[j]), layers) for v, (k, w) in ks.items()}
    eager = {v: (lambda k=k, w=w: k.apply(x, w, r)) for v, (k, w) in ks.items()}
    n = 5 if tokens <= 64 else 1
    t = {m: {v: [] for v in ks} for m in ("graph", "layers", "eager")}
    for _ in range(n):
        for v in ks:
            t["graph"][v].append(events_median(g1[v].replay, FLUSH["read"], 100 if tokens <= 64 else 20))
            t["layers"][v].append(batch(gl[v].replay, 10 if tokens <= 64 else 3) / layers)
            t["eager"][v].append(batch(eager[v], 50 if tokens <= 64 else 5))
    m = {k: {v: statistics.median(x) for v, x in d.items()} for k, d in t.items()}
    cells = " | ".join(f"{m[k]['off']:.1f} -> {m[k]['on']:.1f} ({m[k]['on'] - m[k]['off']:+.1f})" for k in ("graph", "layers", "eager"))
    print(f"{preset} {name} {tokens} | {cells} | {same}", flush=True)
    del ks, g1, gl, raw; torch.cuda.empty_cache()
