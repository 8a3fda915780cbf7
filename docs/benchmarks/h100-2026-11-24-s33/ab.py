"""In-process A/B of the weight-only GEMMs (session 33): the plugin before (moe_core_triton_old: HEAD b2a3dfb; codes in K
order, scaled in float32 on prefill tiles except e2m1, symmetric int4 without PTX) against now (codes stored in the MMA
fragments' K order, k_order.py; prefill tiles of 4-bit, e4m3 and e2m1 codes scaled in bfloat16, WeightOnly.scales_in;
every int4 code made by PTX; e8m0 scales by their bits). Same layer, weights and inputs, the tuned tiles of each
version's own file (the same file); bf16 ("unquantized") rows run the same code twice and show the noise. Microseconds
per forward: medians of 5 rounds of one forward's CUDA graph, the L2 emptied by reading 256 MB before each replay.
"max diff" is the largest |old - new| over the output's largest |value| (0: bit-identical; split-K atomics may reorder
sums). Run with the old package's folder on PYTHONPATH; optional filters (preset, scheme or token count).
"""
import statistics, sys, torch
from moe_core.presets import model, random_inputs, random_layer
from moe_core.quant import scheme
import moe_core_triton.kernel as new
import moe_core_triton_old.kernel as old
sys.path.insert(0, __file__.rsplit("/", 2)[0] + "/h100-2026-11-24-s31")
from decode_timing import FLUSH, events_median, graph  # noqa: E402

BF16 = torch.bfloat16
SCHEMES = ("unquantized", "w4a16", "w4a16-zp", "w8a16", "w8a16-zp", "fp8-w8a16", "fp8-block-w8a16", "nvfp4-w4a16", "mxfp4")
CASES = [(p, s, t, BF16) for t in (4096, 64, 16, 1) for p in ("mixtral-8x7b", "qwen3-30b-a3b") for s in SCHEMES] + \
        [("gpt-oss-20b", s, t, BF16) for s in ("unquantized", "mxfp4") for t in (4096, 64, 16, 1)] + \
        [("qwen3-30b-a3b", s, t, torch.float16) for s in ("w4a16", "fp8-w8a16", "nvfp4-w4a16") for t in (16, 4096)]
only = sys.argv[1:]
print("case | graph old -> new | max diff")
for preset, name, tokens, dtype in CASES:
    if only and not all(any(f == v for v in (preset, name, str(tokens))) for f in only):
        continue
    cfg = model(preset).config(dtype=dtype)
    sch = scheme(name)
    raw = random_layer(cfg, sch, device="cuda")
    ks = {v: m.TritonKernel(cfg, *sch.keys) for v, m in (("old", old), ("new", new))}
    ws = {v: k.prepare_weights(raw) for v, k in ks.items()}
    x, r = random_inputs(cfg, tokens, device="cuda", seed=tokens)
    outs = {v: ks[v].apply(x, ws[v], r).float() for v in ks}
    diff = ((outs["old"] - outs["new"]).abs().max() / outs["old"].abs().max()).item()
    reps = 40 if tokens <= 64 else 8
    g1 = {v: graph(lambda j, v=v: ks[v].apply(x, ws[v], r)) for v in ks}
    t = {v: [] for v in ks}
    for _ in range(5):
        for v in ks:
            t[v].append(events_median(g1[v].replay, FLUSH["read"], reps))
    m = {v: statistics.median(x) for v, x in t.items()}
    print(f"{preset} {name} {tokens} {str(dtype)[6:]} | {m['old']:.1f} -> {m['new']:.1f} ({100 * (m['old'] / m['new'] - 1):+.1f}%) | {diff:.2e}",
          flush=True)
    del ks, ws, g1, raw, outs
    torch.cuda.empty_cache()
