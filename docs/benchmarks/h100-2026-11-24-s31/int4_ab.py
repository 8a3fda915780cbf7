"""In-process A/B of the int4 decode tiles (session 31): the plugin before (moe_core_triton_old: HEAD 54e4cc8, each
nibble made a 16-bit float in 32-bit integer operations) against now (gemm.biased_int4 with W_PTX: a byte permute and
one lop3 per pair of values). Same layer, weights and inputs; replays alternated. Microseconds per forward, medians:
  graph: one forward's CUDA graph, the L2 emptied by reading 256 MB before each replay;
  layers: a CUDA graph of L forwards, each routed to experts the others do not touch, per forward.
Outputs are compared bit for bit. Run with the old package's folder on PYTHONPATH.
"""
import statistics, sys, torch
from moe_core.presets import model, random_inputs, random_layer
from moe_core.quant import scheme
import moe_core_triton.kernel as new
import moe_core_triton_old.kernel as old
sys.path.insert(0, __file__.rsplit("/", 1)[0])
from decode_timing import FLUSH, batch, disjoint_routings, events_median, graph  # noqa: E402

CASES = [(p, s, t, torch.bfloat16) for p in ("qwen3-30b-a3b", "mixtral-8x7b") for s in ("w4a16", "w4a16-zp") for t in (1, 16, 64)] + \
        [("mixtral-8x7b", "w4a16", 16, torch.float16), ("qwen3-30b-a3b", "w4a16", 1, torch.float16)]
print("case | graph old -> new | layers old -> new | outputs")
for preset, name, tokens, dtype in CASES:
    cfg = model(preset).config(dtype=dtype)
    sch = scheme(name)
    raw = random_layer(cfg, sch, device="cuda")
    ks = {v: m.TritonKernel(cfg, *sch.keys) for v, m in (("old", old), ("new", new))}
    ws = {v: k.prepare_weights(raw) for v, k in ks.items()}
    x, r = random_inputs(cfg, tokens, device="cuda", seed=tokens)
    outs = {v: ks[v].apply(x, ws[v], r) for v in ks}
    same = "identical" if torch.equal(outs["old"], outs["new"]) else f"DIFFER max {(outs['old'].float() - outs['new'].float()).abs().max().item():.3g}"
    layers = max(1, min(16, cfg.num_experts // (tokens * cfg.top_k))) if tokens * cfg.top_k <= cfg.num_experts else 8
    routes = disjoint_routings(cfg, tokens, layers)
    xs = [torch.randn(tokens, cfg.hidden_size, device="cuda", dtype=cfg.dtype) for _ in routes]
    g1 = {v: graph(lambda j, v=v: ks[v].apply(x, ws[v], r)) for v in ks}
    gl = {v: graph(lambda j, v=v: ks[v].apply(xs[j], ws[v], routes[j]), layers) for v in ks}
    t = {m: {v: [] for v in ks} for m in ("graph", "layers")}
    for _ in range(5):
        for v in ks:
            t["graph"][v].append(events_median(g1[v].replay, FLUSH["read"], 60))
            t["layers"][v].append(batch(gl[v].replay, 10) / layers)
    m = {k: {v: statistics.median(x) for v, x in d.items()} for k, d in t.items()}
    cells = " | ".join(f"{m[k]['old']:.1f} -> {m[k]['new']:.1f} ({100 * (m[k]['old'] / m[k]['new'] - 1):+.1f}%)" for k in ("graph", "layers"))
    print(f"{preset} {name} {tokens} {str(dtype)[6:]} | {cells} | {same}", flush=True)
    del ks, ws, g1, gl, raw; torch.cuda.empty_cache()
