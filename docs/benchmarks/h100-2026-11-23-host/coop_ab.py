"""Host time per launch of the table kernel, cooperative vs plain, interleaved batches (median of 15 rounds)."""
import statistics, time, torch
import moe_core_triton.blocks as blocks
from moe_core_triton.launch import Launcher
ids = torch.randint(0, 128, (4096, 1), device="cuda", dtype=torch.int32)
table = torch.zeros(1 << 16, dtype=torch.int32, device="cuda")
bar = torch.zeros(2, dtype=torch.int32, device="cuda")
x = torch.zeros(64, device="cuda")
L = {c: Launcher(blocks._table_kernel, num_warps=4, cooperative=c, HAS_MAP=False, GUARD=False, BLOCK_M=16, E_P2=128, BLOCK=1024, BLOCKS=128) for c in (True, False)}
def batch(fn, n=200):
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(n): fn()
    dt = (time.perf_counter() - t) / n; torch.cuda.synchronize(); return dt * 1e6
runs = {}
for programs, pairs in ((1, 1000), (4, 4096)):
    fns = {f"cooperative={c} programs={programs}": (lambda c=c: L[c]((programs,), ids, ids, ids, table, bar, pairs, 128, 128, 60000, 50000)) for c in (True, False)}
    fns[f"torch add_ ({programs})"] = lambda: x.add_(1)
    for f in fns.values(): batch(f, 20)
    for _ in range(15):
        for name, f in fns.items(): runs.setdefault(name, []).append(batch(f))
for name, v in runs.items():
    print(f"{name:32s} median {statistics.median(v):6.1f} us  min {min(v):6.1f}  max {max(v):6.1f}")
