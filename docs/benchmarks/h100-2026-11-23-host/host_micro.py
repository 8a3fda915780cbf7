"""Host cost per operation on this machine (issue 12): launches, allocations, checks; and a cProfile of one forward."""
import cProfile, pstats, sys, time, torch, triton, triton.language as tl
from moe_core_triton.launch import Launcher

@triton.jit
def k10(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    v = tl.load(a1 + offs, mask=offs < n) + tl.load(a2 + offs, mask=offs < n)
    tl.store(a0 + offs, v, mask=offs < n)

def per_call(fn, n=400):
    for _ in range(20): fn()
    torch.cuda.synchronize()
    best = 1e9
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n): fn()
        best = min(best, (time.perf_counter() - t) / n)
        torch.cuda.synchronize()
    return best * 1e6

ts = [torch.zeros(64, device="cuda") for _ in range(10)]
x = ts[0]
L = Launcher(k10, num_warps=1, BLOCK=64)
print(f"torch x.add_(1)                         {per_call(lambda: x.add_(1)):6.1f} us")
print(f"torch.empty((128, 768), bf16)           {per_call(lambda: torch.empty((128, 768), dtype=torch.bfloat16, device='cuda')):6.1f} us")
print(f"torch.zeros(2, int32)                   {per_call(lambda: torch.zeros(2, dtype=torch.int32, device='cuda')):6.1f} us")
print(f"is_current_stream_capturing             {per_call(lambda: torch.cuda.is_current_stream_capturing(), 4000):6.2f} us")
print(f"Launcher, 10 tensors + int (direct)     {per_call(lambda: L((1,), *ts, 64)):6.1f} us")
ck = k10[(1,)](*ts, 64, BLOCK=64)
stream = torch._C._cuda_getCurrentRawStream(0)
ptrs = [t.data_ptr() for t in ts]
print(f"compiled.run, tensors                   {per_call(lambda: ck.run(1, 1, 1, stream, ck.function, ck.packed_metadata, None, None, None, *ts, 64, 64)):6.1f} us")
print(f"compiled.run, int pointers              {per_call(lambda: ck.run(1, 1, 1, stream, ck.function, ck.packed_metadata, None, None, None, *ptrs, 64, 64)):6.1f} us")
print(f"k10[grid] through triton                {per_call(lambda: k10[(1,)](*ts, 64, BLOCK=64), 200):6.1f} us", flush=True)

from moe_core.presets import model, random_inputs, random_layer
from moe_core.quant import scheme
from moe_core_triton.kernel import TritonKernel
cfg = model("qwen3-30b-a3b").config()
for name, tokens in (("fp8-block", 16), ("unquantized", 1)):
    sch = scheme(name); k = TritonKernel(cfg, *sch.keys); w = k.prepare_weights(random_layer(cfg, sch, device="cuda")); xx, r = random_inputs(cfg, tokens, device="cuda")
    print(f"{name} {tokens} tok: host per forward back to back (min of 5 x 100): {per_call(lambda: k.apply(xx, w, r), 100):6.1f} us", flush=True)
    pr = cProfile.Profile(); pr.enable()
    for _ in range(200): k.apply(xx, w, r)
    pr.disable(); torch.cuda.synchronize()
    pstats.Stats(pr).sort_stats("tottime").print_stats(22)
