"""Session 37: are the Mixtral rows whose eager time exceeds the graph time by more than 40 µs (call 10, 1024 and
4096 tokens) host time, or the timing method? For each case, in one process, one input set:

- graph, cold: CUDA-graph replays with the L2 emptied by a read before each (the bench's graph column);
- graph, back to back: the same graph replayed in ~20 ms batches, as the eager column times calls;
- eager, back to back: the bench's eager column; host: the time until one eager call returns, the GPU idle before it.

If eager ≈ graph back to back, the layer's host work is hidden behind its GPU work and eager − graph (cold) is the
difference between the two timing methods, not host time.

    python eager_control.py
"""
import torch

from moe_core.bench.timing import _back_to_back_cuda, cold_l2_seconds, host_time
from moe_core.presets import model, random_inputs, random_layer
from moe_core.quant import scheme
from moe_core_triton.kernel import TritonKernel
from fused_ab import graph_of

CASES = [("mixtral-8x7b", "unquantized", 1024), ("mixtral-8x7b", "fp8-block", 1024), ("mixtral-8x7b", "fp8-block", 4096),
         ("mixtral-8x7b", "fp8-channel", 4096), ("qwen3-30b-a3b", "unquantized", 1)]

print(torch.cuda.get_device_name(), torch.__version__, flush=True)
print("case | graph cold | graph back to back | eager back to back | host | eager - graph cold | eager - graph back to back (us)")
for preset, name, tokens in CASES:
    cfg, sch = model(preset).config(), scheme(name)
    kernel = TritonKernel(cfg, sch.weight_key, sch.activation_key)
    weights = kernel.prepare_weights(random_layer(cfg, sch, device="cuda", seed=0))
    x, routing = random_inputs(cfg, tokens, device="cuda", seed=tokens)
    forward = lambda: kernel.apply(x, weights, routing)  # noqa: E731
    replay = graph_of(forward)
    cold, b2b = cold_l2_seconds(replay) * 1e6, _back_to_back_cuda(replay) * 1e6
    eager, host = _back_to_back_cuda(forward) * 1e6, host_time(forward) * 1e6
    print(f"{preset} {name} {tokens} | {cold:.1f} | {b2b:.1f} | {eager:.1f} | {host:.1f} | {eager - cold:+.1f} | {eager - b2b:+.1f}", flush=True)
    del kernel, weights, replay
    torch.cuda.empty_cache()
