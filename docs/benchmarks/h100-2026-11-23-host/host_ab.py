"""Eager per-call time, calls back to back, of Qwen3 forwards: one process per plugin version, alternated by the driver."""
import sys, torch
from moe_core.bench.timing import Timer
from moe_core.presets import model, random_inputs, random_layer
from moe_core.quant import scheme
from moe_core_triton.kernel import TritonKernel
cfg = model("qwen3-30b-a3b").config(); timer = Timer("cuda")
for name in ("unquantized", "fp8-channel", "fp8-block"):
    sch = scheme(name); k = TritonKernel(cfg, *sch.keys); w = k.prepare_weights(random_layer(cfg, sch, device="cuda"))
    for tokens in (1, 16, 64):
        x, r = random_inputs(cfg, tokens, device="cuda")
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s): k.apply(x, w, r)
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(g): k.apply(x, w, r)
        print(sys.argv[1], name, tokens, f"{timer.back_to_back(lambda: k.apply(x, w, r)) * 1e6:.1f}", f"{timer.back_to_back(g.replay) * 1e6:.1f}", flush=True)
