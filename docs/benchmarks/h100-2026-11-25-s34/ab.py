"""In-process A/B of the weight-only layers (session 34): the plugin at 3c62fb6 (moe_core_triton_old: int4 codes in
fragment order, the other schemes' in K order, its tuned tiles) against now (every scheme's codes in fragment order,
k_order.py, with the tiles searched again on them). Same layer, weights and inputs; each version its own data file.
bf16 ("unquantized") rows run the same code twice and show the noise. Microseconds per forward: medians of 5 rounds of
one forward's CUDA graph, the L2 emptied by reading 256 MB before each replay. "max diff": the largest |old - new| over
the output's largest |value|. Run with the old package's folder on PYTHONPATH.

    python ab.py [presets=a,b] [schemes=a,b] [tokens=1,16]
"""
import statistics, sys, torch
from moe_core.presets import model, random_inputs, random_layer
from moe_core.quant import scheme
import moe_core_triton.kernel as new
import moe_core_triton_old.kernel as old
sys.path.insert(0, __file__.rsplit("/", 2)[0] + "/h100-2026-11-24-s31")
from decode_timing import FLUSH, events_median, graph  # noqa: E402

SCHEMES = "unquantized,w4a16,w4a16-zp,w8a16,w8a16-zp,fp8-w8a16,fp8-block-w8a16,nvfp4-w4a16,mxfp4"
pick = {"presets": "qwen3-30b-a3b,mixtral-8x7b", "schemes": SCHEMES, "tokens": "1,16,64,4096"}
pick |= dict(a.split("=", 1) for a in sys.argv[1:])
print("case | graph old -> new | max diff")
for tokens in map(int, pick["tokens"].split(",")):
    for preset in pick["presets"].split(","):
        for name in pick["schemes"].split(","):
            cfg = model(preset).config()
            sch = scheme(name)
            raw = random_layer(cfg, sch, device="cuda")
            ks = {v: m.TritonKernel(cfg, *sch.keys) for v, m in (("old", old), ("new", new))}
            ws = {v: k.prepare_weights(raw) for v, k in ks.items()}
            x, r = random_inputs(cfg, tokens, device="cuda", seed=tokens)
            outs = {v: ks[v].apply(x, ws[v], r).float() for v in ks}
            diff = ((outs["old"] - outs["new"]).abs().max() / outs["old"].abs().max()).item()
            reps = 40 if tokens <= 64 else 8
            g = {v: graph(lambda j, v=v: ks[v].apply(x, ws[v], r)) for v in ks}
            t = {v: [] for v in ks}
            for _ in range(5):
                for v in ks:
                    t[v].append(events_median(g[v].replay, FLUSH["read"], reps))
            m = {v: statistics.median(x) for v, x in t.items()}
            print(f"{preset} {name} {tokens} | {m['old']:.1f} -> {m['new']:.1f} ({100 * (m['old'] / m['new'] - 1):+.1f}%) | {diff:.2e}",
                  flush=True)
            del ks, ws, g, raw, outs
            torch.cuda.empty_cache()
