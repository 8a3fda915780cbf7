"""Graph and eager time of PairTable forwards against block-table forwards of the same code, by pair count: where
does grouping the pairs in every GEMM program stop paying (issue 12, PAIR_TABLE_MAX_PAIRS)?"""
import statistics, torch
from moe_core.presets import model, random_inputs, random_layer
from moe_core.quant import scheme
from moe_core_triton.kernel import TritonKernel

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

print("preset scheme tokens pairs | graph block-table | graph pair-table | eager block-table | eager pair-table")
for preset, tokens_list in (("qwen3-30b-a3b", (1, 4, 8, 16, 32, 64)), ("mixtral-8x7b", (1, 16, 64, 128, 256))):
    cfg = model(preset).config()
    for name in ("unquantized", "fp8-block"):
        sch = scheme(name); raw = random_layer(cfg, sch, device="cuda")
        for tokens in tokens_list:
            x, r = random_inputs(cfg, tokens, device="cuda")
            ks = {lim: type(f"K{lim}", (TritonKernel,), {"pair_table_max_pairs": lim})(cfg, *sch.keys) for lim in (0, 1 << 20)}
            ws = {lim: k.prepare_weights(raw) for lim, k in ks.items()}
            fns = {lim: (lambda k=ks[lim], w=ws[lim]: k.apply(x, w, r)) for lim in ks}
            o = {lim: f() for lim, f in fns.items()}
            assert torch.equal(o[0], o[1 << 20]), (preset, name, tokens)
            graphs = {lim: graph_of(f) for lim, f in fns.items()}
            gt = {lim: [] for lim in ks}; et = {lim: [] for lim in ks}
            for _ in range(9):
                for lim, (replay, n) in graphs.items(): gt[lim].append(batch(replay, 5) / n)
                for lim, f in fns.items(): et[lim].append(batch(f, 50))
            g = {lim: statistics.median(v) for lim, v in gt.items()}; e = {lim: statistics.median(v) for lim, v in et.items()}
            print(f"{preset} {name} {tokens} {tokens * cfg.top_k} | {g[0]:6.1f} | {g[1 << 20]:6.1f} | {e[0]:6.1f} | {e[1 << 20]:6.1f}", flush=True)
