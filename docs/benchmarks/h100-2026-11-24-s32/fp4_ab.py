"""In-process A/B of the fp4 and fp8 weight-only GEMMs (session 32): the plugin before (moe_core_triton_old: HEAD 767cce1,
e2m1 and e4m3 codes made float16 bits, then float32, scaled in float32, nvfp4's global scale folded into every weight)
against now (W_CODES 3: gemm.e2m1_values by a PTX table lookup, scaled in bfloat16, nvfp4's global scale once after the
K loop; call 5: e4m3 codes made exact 16-bit values by gemm.e4m3_values in PTX). Same layer, weights and inputs; replays
alternated. Call 1 ran the fp4 cases, call 5 the fp8 ones (``python fp4_ab.py fp8-w8a16 fp8-block-w8a16``). Call 9 ran
it against HEAD 41e9b4b instead (.scratch/s32_head), for scales and zero points stored with N contiguous
(kernel.columns_adjacent), with the int4 and 8-bit integer cases (``python fp4_ab.py mixtral-8x7b``). Microseconds
per forward, medians of 5 rounds:
  graph: one forward's CUDA graph, the L2 emptied by reading 256 MB before each replay;
  layers: (at most 64 tokens) a CUDA graph of L forwards, each routed to experts the others do not touch, per forward.
"max diff" is the largest |old - new| over the output's largest |value| (0: bit-identical; split-K atomics may reorder
sums). Run with the old package's folder on PYTHONPATH.
"""
import statistics, sys, torch
from moe_core.presets import model, random_inputs, random_layer
from moe_core.quant import scheme
import moe_core_triton.kernel as new
import moe_core_triton_old.kernel as old
sys.path.insert(0, __file__.rsplit("/", 2)[0] + "/h100-2026-11-24-s31")
from decode_timing import FLUSH, batch, disjoint_routings, events_median, graph  # noqa: E402

BF16 = torch.bfloat16
CASES = [(p, s, t, BF16) for p in ("qwen3-30b-a3b", "mixtral-8x7b") for s in ("mxfp4", "nvfp4-w4a16") for t in (1, 16, 64, 4096)] + \
        [("gpt-oss-20b", "mxfp4", t, BF16) for t in (1, 16, 64, 4096)] + \
        [("qwen3-30b-a3b", "nvfp4-w4a16", 16, torch.float16), ("mixtral-8x7b", "nvfp4-w4a16", 16, torch.float16)] + \
        [(p, s, t, BF16) for p in ("qwen3-30b-a3b", "mixtral-8x7b") for s in ("fp8-w8a16", "fp8-block-w8a16") for t in (1, 16, 64, 4096)] + \
        [("qwen3-30b-a3b", "fp8-w8a16", 16, torch.float16)] + \
        [(p, s, t, BF16) for p in ("mixtral-8x7b", "qwen3-30b-a3b") for s in ("w4a16", "w4a16-zp", "w8a16", "w8a16-zp") for t in (1, 16, 64)]
only = sys.argv[1:]  # optional filters: preset, scheme or token count
print("case | graph old -> new | layers old -> new | max diff")
for preset, name, tokens, dtype in CASES:
    if only and not any(f in (preset, name, str(tokens)) for f in only):
        continue
    cfg = model(preset).config(dtype=dtype)
    sch = scheme(name)
    raw = random_layer(cfg, sch, device="cuda")
    ks = {v: m.TritonKernel(cfg, *sch.keys) for v, m in (("old", old), ("new", new))}
    ws = {v: k.prepare_weights(raw) for v, k in ks.items()}
    x, r = random_inputs(cfg, tokens, device="cuda", seed=tokens)
    outs = {v: ks[v].apply(x, ws[v], r).float() for v in ks}
    diff = ((outs["old"] - outs["new"]).abs().max() / outs["old"].abs().max()).item()
    reps = 60 if tokens <= 64 else 10
    g1 = {v: graph(lambda j, v=v: ks[v].apply(x, ws[v], r)) for v in ks}
    t = {"graph": {v: [] for v in ks}, "layers": {v: [] for v in ks}}
    if tokens <= 64:
        layers = max(1, min(16, cfg.num_experts // (tokens * cfg.top_k))) if tokens * cfg.top_k <= cfg.num_experts else 8
        routes = disjoint_routings(cfg, tokens, layers)
        xs = [torch.randn(tokens, cfg.hidden_size, device="cuda", dtype=cfg.dtype) for _ in routes]
        gl = {v: graph(lambda j, v=v: ks[v].apply(xs[j], ws[v], routes[j]), layers) for v in ks}
    for _ in range(5):
        for v in ks:
            t["graph"][v].append(events_median(g1[v].replay, FLUSH["read"], reps))
            if tokens <= 64:
                t["layers"][v].append(batch(gl[v].replay, 10) / layers)
    m = {k: {v: statistics.median(x) for v, x in d.items() if x} for k, d in t.items()}
    cells = " | ".join(f"{m[k]['old']:.1f} -> {m[k]['new']:.1f} ({100 * (m[k]['old'] / m[k]['new'] - 1):+.1f}%)" if m[k] else "-"
                       for k in ("graph", "layers"))
    print(f"{preset} {name} {tokens} {str(dtype)[6:]} | {cells} | {diff:.2e}", flush=True)
    del ks, ws, g1, raw
    gl = None
    torch.cuda.empty_cache()
