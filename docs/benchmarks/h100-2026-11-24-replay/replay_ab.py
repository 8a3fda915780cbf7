"""In-process A/B of replayed eager forwards (issue 12): one TritonKernel per case with replays (the plugin as it is)
and one whose forwards all run in full (``_replay_signature`` patched to None), same weights and inputs, one process.

Per case: the outputs compared bit for bit; *host*: the time until one call returns with the GPU idle before it
(median of 200, 40 for "large", interleaved); *eager*: back-to-back calls, CUDA events around batches of 100 (20), median of 11 interleaved
batches; microseconds per forward. Then, for Qwen3-30B-A3B bf16 at 1 token, where the replayed call's host time goes:
apply() (validation + forward), forward() alone, and the replay alone.

    replay_ab.py [pairs]   forwards of at most 64 pairs (PairTable)
    replay_ab.py tables    block-table forwards (more than 64 pairs) that reuse scratch buffers
    replay_ab.py large     forwards that allocate their buffers (batches of 20)
"""
import statistics, sys, time, torch
from moe_core.presets import model, random_inputs, random_layer
from moe_core.quant import scheme
from moe_core_triton.kernel import TritonKernel


def batch(fn, n=100):
    torch.cuda.synchronize(); s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(n): fn()
    e.record(); e.synchronize(); return s.elapsed_time(e) / n * 1e3


def host(fn):
    torch.cuda.synchronize(); t = time.perf_counter(); fn(); dt = time.perf_counter() - t; torch.cuda.synchronize(); return dt * 1e6


CASES = {
    "pairs": [("qwen3-30b-a3b", s, t) for s in ("unquantized", "fp8-block", "fp8-channel", "int8", "w4a16", "w8a16") for t in (1, 4, 8)]
    + [("mixtral-8x7b", s, t) for s in ("unquantized", "fp8-channel", "fp8-block", "w4a16") for t in (1, 16, 32)],
    "tables": [("qwen3-30b-a3b", s, t) for s in ("unquantized", "fp8-block", "fp8-channel", "w4a16") for t in (9, 16, 64, 128)]
    + [("mixtral-8x7b", s, t) for s in ("unquantized", "fp8-channel", "fp8-block") for t in (64, 100)],
    "large": [("qwen3-30b-a3b", s, t) for s in ("unquantized", "fp8-block", "fp8-channel") for t in (256, 1024, 4096)]
    + [("mixtral-8x7b", s, t) for s in ("unquantized", "fp8-block") for t in (256, 1024)],
}
mode = sys.argv[1] if len(sys.argv) > 1 else "pairs"
print("case | host off | host on | eager off | eager on | replayed | output on vs off  (us per forward)")
for preset, name, tokens in CASES[mode]:
    cfg = model(preset).config()
    sch = scheme(name); raw = random_layer(cfg, sch, device="cuda")
    on, off = TritonKernel(cfg, *sch.keys), TritonKernel(cfg, *sch.keys)
    off._replay_signature = lambda *a: None
    w_on, w_off = on.prepare_weights(raw), off.prepare_weights(raw)
    x, r = random_inputs(cfg, tokens, device="cuda")
    fns = {"off": lambda: off.apply(x, w_off, r), "on": lambda: on.apply(x, w_on, r)}
    outs = {v: f() for v, f in fns.items()}
    outs = {v: f() for v, f in fns.items()}  # the second call replays
    same = "identical" if torch.equal(outs["on"], outs["off"]) else f"DIFFER max {(outs['on'].float() - outs['off'].float()).abs().max().item():.3g}"
    replayed = sum(1 for v in on._replays.values() if v not in (None, False))
    hs = {v: [] for v in fns}
    reps = 100 if mode != "large" else 20
    for _ in range(reps * 2):
        for v, f in fns.items(): hs[v].append(host(f))
    for f in fns.values(): batch(f, 20)
    t = {v: [] for v in fns}
    for _ in range(11):
        for v, f in fns.items(): t[v].append(batch(f, reps))
    h = {v: statistics.median(s) for v, s in hs.items()}; m = {v: statistics.median(s) for v, s in t.items()}
    print(f"{preset} {name} {tokens} tok | {h['off']:6.1f} | {h['on']:6.1f} | {m['off']:6.1f} | {m['on']:6.1f} | {replayed} | {same}", flush=True)

if mode != "pairs":
    sys.exit()
cfg = model("qwen3-30b-a3b").config(); sch = scheme("unquantized")
k = TritonKernel(cfg, None, None); w = k.prepare_weights(random_layer(cfg, sch, device="cuda")); x, r = random_inputs(cfg, 1, device="cuda")
k.apply(x, w, r); k.apply(x, w, r)
sig = k._replay_signature(x, r, None, False); rep = k._replays[sig]; inputs = (x, r.topk_ids, r.topk_weights, None)
parts = {"apply": lambda: k.apply(x, w, r),
         "forward": lambda: k.forward(x, w, r, expert_map=None, apply_router_weight_on_input=False),
         "signature": lambda: k._replay_signature(x, r, None, False),
         "replay": lambda: rep(w, inputs, sig[1]),
         "validate": lambda: k.validate_inputs(x, w, r, None, False),
         "torch.empty": lambda: torch.empty((1, 2048), dtype=torch.bfloat16, device="cuda"),
         "x.add_(1)": lambda: x.add_(0)}
samples = {p: [] for p in parts}
for _ in range(300):
    for p, f in parts.items(): samples[p].append(host(f))
print("host time by part, qwen3 bf16 1 token (median of 300, us): " + ", ".join(f"{p} {statistics.median(s):.1f}" for p, s in samples.items()))
