"""What a one-token Qwen3-30B-A3B layer's bytes take to read at best on this GPU (session 31): a plain Triton kernel that
only reads (and sums) a buffer, its grid and tile swept, timed as `moe-core bench` times graphs
(moe_core.bench.timing.cold_l2_seconds: CUDA events, the L2 emptied by a read before each run). Sizes: the layer's
weights (75.5 MB: 8 experts x 3 x 2048 x 768 in bf16), GEMM1's share (50.3 MB) and GEMM2's (25.2 MB); and GEMM1's then
GEMM2's reads as two kernels in one CUDA graph, as the layer runs them. torch.sum of the same bytes for comparison.
"""
import itertools, torch, triton, triton.language as tl
from moe_core.bench.timing import cold_l2_seconds


@triton.jit
def _read(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid, programs = tl.program_id(0), tl.num_programs(0)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(pid * BLOCK, n, programs * BLOCK):
        acc += tl.load(x_ptr + start + offs, mask=start + offs < n, other=0.0).to(tl.float32)
    tl.store(out_ptr + pid, tl.sum(acc))


def best_read(x, out):
    best = None
    for programs, block, warps in itertools.product((132, 264, 528, 1056), (2048, 4096, 8192), (4, 8)):
        run = lambda: _read[(programs,)](x, out, x.numel(), BLOCK=block, num_warps=warps)  # noqa: E731
        t = cold_l2_seconds(run, 10, 50)
        if best is None or t < best[0]:
            best = (t, programs, block, warps, run)
    return best


out = torch.empty(1056, device="cuda")
sizes = {"layer 75.5 MB": 8 * 3 * 2048 * 768, "GEMM1 50.3 MB": 8 * 2 * 2048 * 768, "GEMM2 25.2 MB": 8 * 2048 * 768}
bufs = {k: torch.randn(n, device="cuda", dtype=torch.bfloat16) for k, n in sizes.items()}
runs = {}
for name, x in bufs.items():
    t, programs, block, warps, runs[name] = best_read(x, out)
    ts = cold_l2_seconds(lambda: x.sum(), 10, 50)
    print(f"{name}: best read {t * 1e6:.1f} us ({x.numel() * 2 / t / 1e12:.2f} TB/s; {programs} programs, BLOCK {block}, "
          f"{warps} warps) | torch.sum {ts * 1e6:.1f} us", flush=True)
g = torch.cuda.CUDAGraph()
runs["GEMM1 50.3 MB"](); runs["GEMM2 25.2 MB"](); torch.cuda.synchronize()
with torch.cuda.graph(g):
    runs["GEMM1 50.3 MB"](); runs["GEMM2 25.2 MB"]()
t = cold_l2_seconds(g.replay, 10, 50)
print(f"GEMM1's then GEMM2's bytes, two kernels in one graph: {t * 1e6:.1f} us ({75.5e6 / t / 1e12:.2f} TB/s); "
      f"80% of the bench's roofline (3.0 TB/s copy) for the layer is {75.5e6 / 3.0e12 / 0.8 * 1e6:.1f} us")
