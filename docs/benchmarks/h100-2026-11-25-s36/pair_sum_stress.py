"""Session 36: the two-GEMM layer's in-kernel top-k sum (reduce.sum_pairs_if_last: the last program of a column tile
reads the other programs' rows with plain loads after their arrival) run many times on one input: every output must be
the same bits (the sum order is fixed), so any difference is a row read before it was visible. fused.py's sums needed
atomic exchanges for that reason (fused_probe.py calls 3 to 5).

    python pair_sum_stress.py
"""
import torch
from moe_core.presets import model, random_inputs, random_layer
from moe_core.quant import scheme
from moe_core_triton.kernel import TritonKernel

for preset, tokens in (("mixtral-8x7b", 32), ("mixtral-8x7b", 1), ("qwen3-30b-a3b", 8), ("qwen3-30b-a3b", 1)):
    cfg = model(preset).config()
    sch = scheme("unquantized")
    kernel = TritonKernel(cfg, *sch.keys)
    kernel.fused_override = False  # the two GEMMs, whose GEMM2 sums the top-k rows (a PairTable forward)
    weights = kernel.prepare_weights(random_layer(cfg, sch, device="cuda"))
    x, routing = random_inputs(cfg, tokens, device="cuda", seed=tokens)
    first = kernel.apply(x, weights, routing).clone()
    differ = sum(not torch.equal(kernel.apply(x, weights, routing), first) for _ in range(300))
    print(f"{preset} {tokens} tokens: {differ} of 300 forwards differ from the first in any bit", flush=True)
    del kernel, weights
    torch.cuda.empty_cache()
