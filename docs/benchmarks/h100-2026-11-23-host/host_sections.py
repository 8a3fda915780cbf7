"""Host time per forward by section (perf_counter wrappers, no profiler), calls back to back (issue 12)."""
import collections, functools, sys, time, torch
import moe_core.kernel as mk
import moe_core_triton.kernel as tk
import moe_core_triton.blocks as blocks
import moe_core_triton.launch as launch
import moe_core_triton.scratch as scratch
import moe_core_triton.quantize as quantize
import moe_core_triton.reduce as reduce
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
wrap(tk.TritonKernel, "forward"); wrap(tk.TritonKernel, "_gemm_launches"); wrap(tk.TritonKernel, "_scratch")
wrap(tk.TritonKernel, "_run_gemm1"); wrap(tk.TritonKernel, "_run_gemm2"); wrap(tk.TritonKernel, "_quantize"); wrap(tk.TritonKernel, "_gemm")
wrap(tk, "standard_table", "standard_table"); wrap(tk, "topk_sum", "topk_sum")
wrap(launch.Launcher, "__call__", "Launcher.__call__"); wrap(scratch, "new_empty", "new_empty"); wrap(scratch.Scratch, "empty", "Scratch.empty")
wrap(blocks, "barrier_state")
from moe_core.presets import model, random_inputs, random_layer
from moe_core.quant import scheme
cfg = model("qwen3-30b-a3b").config()
for name, tokens in (("fp8-block", 1), ("fp8-block", 16), ("unquantized", 1)):
    sch = scheme(name); k = tk.TritonKernel(cfg, *sch.keys); w = k.prepare_weights(random_layer(cfg, sch, device="cuda")); x, r = random_inputs(cfg, tokens, device="cuda")
    for _ in range(20): k.apply(x, w, r)
    torch.cuda.synchronize(); acc.clear(); calls.clear(); n = 300
    t = time.perf_counter()
    for _ in range(n): k.apply(x, w, r)
    wall = (time.perf_counter() - t) / n; torch.cuda.synchronize()
    print(f"== {name} {tokens} tok: {wall*1e6:.1f} us per forward (wall, back to back)")
    for label, v in acc.most_common():
        print(f"   {label:22s} {v/n*1e6:7.1f} us  x{calls[label]/n:.0f}")
# cooperative vs plain launch of the same table kernel, one program
ids = torch.randint(0, 128, (8, 1), device="cuda", dtype=torch.int32)
table = torch.empty(10000, dtype=torch.int32, device="cuda")
for coop in (True, False):
    L = launch.Launcher(blocks._table_kernel, num_warps=4, cooperative=coop, HAS_MAP=False, GUARD=False, BLOCK_M=16, E_P2=128, BLOCK=1024, BLOCKS=128)
    f = lambda: L((1,), ids, ids, ids, table, table, 8, 128, 128, 128, 200)
    for _ in range(20): f()
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(500): f()
    print(f"table launch cooperative={coop}: {(time.perf_counter()-t)/500*1e6:.1f} us host per launch"); torch.cuda.synchronize()
x1 = torch.zeros(64, device="cuda")
t = time.perf_counter()
for _ in range(500): x1.add_(1)
print(f"torch add_: {(time.perf_counter()-t)/500*1e6:.1f} us")
