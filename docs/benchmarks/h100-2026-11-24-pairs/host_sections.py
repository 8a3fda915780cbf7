"""Host time per forward by section (perf_counter wrappers, no profiler), calls back to back (issue 12)."""
import collections, functools, time, torch
import moe_core.kernel as mk
import moe_core_triton.kernel as tk
import moe_core_triton.blocks as blocks
import moe_core_triton.launch as launch
import moe_core_triton.scratch as scratch
acc = collections.Counter(); calls = collections.Counter()
def wrap(owner, name, label=None):
    fn = getattr(owner, name); label = label or name
    @functools.wraps(fn)
    def w(*a, **k):
        t = time.perf_counter()
        try: return fn(*a, **k)
        finally: acc[label] += time.perf_counter() - t; calls[label] += 1
    setattr(owner, name, w)
wrap(mk.MoEKernel, "apply"); wrap(mk.MoEKernel, "validate_inputs")
for n in ("forward", "_gemm_launches", "_scratch", "_run_gemm1", "_run_gemm2", "_quantize", "_gemm", "rows_of"):
    wrap(tk.TritonKernel, n)
wrap(tk, "pair_table", "pair_table"); wrap(tk, "stream_words", "stream_words"); wrap(tk, "quantize_activations", "quantize_activations")
wrap(launch.Launcher, "__call__", "Launcher.__call__"); wrap(scratch.Scratch, "empty", "Scratch.empty")
from moe_core.presets import model, random_inputs, random_layer
from moe_core.quant import scheme
cfg = model("qwen3-30b-a3b").config()
x1 = torch.zeros(64, device="cuda")
for name, tokens in (("unquantized", 1), ("fp8-block", 1), ("fp8-channel", 1), ("unquantized", 1)):
    sch = scheme(name); k = tk.TritonKernel(cfg, *sch.keys); w = k.prepare_weights(random_layer(cfg, sch, device="cuda")); x, r = random_inputs(cfg, tokens, device="cuda")
    for _ in range(20): k.apply(x, w, r)
    torch.cuda.synchronize(); acc.clear(); calls.clear(); n = 300
    t = time.perf_counter()
    for _ in range(n): k.apply(x, w, r)
    wall = (time.perf_counter() - t) / n; torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n): x1.add_(1)
    add = (time.perf_counter() - t) / n; torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n): torch.empty((8, 2048), dtype=torch.bfloat16, device="cuda")
    emp = (time.perf_counter() - t) / n; torch.cuda.synchronize()
    print(f"== {name} {tokens} tok: {wall*1e6:.1f} us per forward (wall, back to back, wrappers included); torch add_ {add*1e6:.1f} us, torch.empty {emp*1e6:.1f} us")
    for label, v in acc.most_common():
        print(f"   {label:22s} {v/n*1e6:7.1f} us  x{calls[label]/n:.0f}")
