"""Session 37: how many of 50 Qwen3-30B-A3B bf16 decode forwards differ in any bit from the first, as the data file
runs them (the one-launch layer at 1 and 2 tokens, the two GEMMs at 16) and with TritonKernel.deterministic.

    python determinism.py
"""
import torch

from moe_core.presets import model, random_inputs, random_layer
from moe_core.quant import scheme
from moe_core_triton.kernel import TritonKernel

cfg = model("qwen3-30b-a3b").config()
raw = random_layer(cfg, scheme("unquantized"), device="cuda", seed=0)
for deterministic in (False, True):
    kernel = type("Kernel", (TritonKernel,), {"deterministic": deterministic})(cfg, None, None)
    weights = kernel.prepare_weights(raw)
    for tokens in (1, 2, 16):
        x, routing = random_inputs(cfg, tokens, device="cuda", seed=tokens)
        first = kernel.apply(x, weights, routing).clone()
        differ = sum(not torch.equal(kernel.apply(x, weights, routing), first) for _ in range(50))
        print(f"deterministic={deterministic} tokens={tokens}: {differ} of 50 forwards differ from the first in any bit", flush=True)
