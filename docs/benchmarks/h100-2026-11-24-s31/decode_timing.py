"""How a small layer's CUDA-graph time depends on the way the L2 cache is emptied before each replay (session 31).

triton.testing.do_bench empties the L2 by writing zeros over 256 MB, so every timed call starts with the L2 full of
dirty lines, written back to HBM while the call streams its weights. This script times one forward's CUDA graph with
  zero: do_bench as `moe-core bench` runs it (cache.zero_() before each replay),
  read: the same loop with the cache buffer read (cache.sum(): the L2 left full of clean lines),
  none: replays back to back, no emptying,
  layers: a graph of L forwards, each routed to experts no other forward of the graph touches (an engine's decode
          step: every layer brings its own weights), per forward,
and reads a 16-bit tensor of the layer's weight bytes (x.sum()) the same ways: what a plain stream of those bytes takes.

    python decode_timing.py
"""
import statistics, sys, torch
from triton.testing import do_bench
from moe_core.presets import model, random_inputs, random_layer
from moe_core.quant import scheme
from moe_core.routing import Routing
from moe_core.bench.roofline import work
from moe_core_triton.kernel import TritonKernel

CACHE = torch.empty(256 << 20 >> 2, dtype=torch.int32, device="cuda").zero_()
FLUSH = {"zero": CACHE.zero_, "read": lambda: CACHE.sum(), "none": lambda: None}


def events_median(fn, flush, n=200):
    for _ in range(10):
        flush(); fn()
    s = [torch.cuda.Event(enable_timing=True) for _ in range(n)]; e = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for i in range(n):
        flush(); s[i].record(); fn(); e[i].record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in zip(s, e)) * 1e3


def batch(fn, n=50):
    fn(); torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(n): fn()
    e.record(); e.synchronize(); return s.elapsed_time(e) / n * 1e3


def graph(fn, n=1):
    side = torch.cuda.Stream(); side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2): fn(0)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for j in range(n): fn(j)
    return g


def disjoint_routings(cfg, tokens, layers, seed=0):
    """``layers`` routings whose expert sets do not meet (tokens x top_k distinct experts each, where there are enough)."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    per = tokens * cfg.top_k
    for j in range(layers):
        if per * layers <= cfg.num_experts:
            ids = torch.arange(j * per, (j + 1) * per).view(tokens, cfg.top_k)
        else:
            ids = torch.stack([torch.randperm(cfg.num_experts, generator=gen)[: cfg.top_k] for _ in range(tokens)])
        w = torch.rand(tokens, cfg.top_k, generator=gen) + 0.1
        out.append(Routing(ids.to(torch.int32).cuda(), (w / w.sum(-1, keepdim=True)).cuda()))
    return out


def main():
    CASES = [("qwen3-30b-a3b", s, t) for s in ("unquantized", "w4a16", "fp8-w8a16", "mxfp4", "fp8-channel") for t in (1,)] + \
            [("qwen3-30b-a3b", "unquantized", 16), ("qwen3-30b-a3b", "w4a16", 16), ("mixtral-8x7b", "unquantized", 1), ("mixtral-8x7b", "w4a16", 1)]
    print("case | weight MB | dobench zero | events zero | events read | back to back | layers, per forward | layers n | stream zero/read/none (us)")
    for preset, name, tokens in CASES:
        cfg = model(preset).config(); sch = scheme(name)
        kernel = TritonKernel(cfg, *sch.keys)
        w = kernel.prepare_weights(random_layer(cfg, sch, device="cuda"))
        x, r = random_inputs(cfg, tokens, device="cuda", seed=tokens)
        layers = max(1, min(16, cfg.num_experts // (tokens * cfg.top_k))) if tokens * cfg.top_k <= cfg.num_experts else 8
        routes = disjoint_routings(cfg, tokens, layers)
        xs = [torch.randn(tokens, cfg.hidden_size, device="cuda", dtype=cfg.dtype) for _ in routes]
        g1 = graph(lambda j: kernel.apply(x, w, r))
        gl = graph(lambda j: kernel.apply(xs[j], w, routes[j]), layers)
        mb = work(cfg, sch.weight_key, r).bytes / 1e6
        stream = torch.empty(int(mb * 1e6 / 2), dtype=torch.bfloat16, device="cuda").normal_()
        t = dict(db=do_bench(g1.replay, warmup=25, rep=100, return_mode="median") * 1e3,
                 zero=events_median(g1.replay, FLUSH["zero"]), read=events_median(g1.replay, FLUSH["read"]),
                 b2b=batch(g1.replay), layers=batch(gl.replay, 20) / layers)
        st = {k: events_median(stream.sum, f) for k, f in FLUSH.items()}
        print(f"{preset} {name} {tokens} | {mb:.1f} | {t['db']:.1f} | {t['zero']:.1f} | {t['read']:.1f} | {t['b2b']:.1f} | {t['layers']:.1f} | {layers} | "
              f"{st['zero']:.1f} / {st['read']:.1f} / {st['none']:.1f}", flush=True)


if __name__ == "__main__":
    main()
