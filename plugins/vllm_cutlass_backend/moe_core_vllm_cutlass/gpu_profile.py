"""Where one forward's GPU time goes: every kernel (and memset) a ``MoEKernel.apply`` launches, timed by torch.profiler.

Used by :mod:`moe_core_vllm_cutlass.gpu_check`, which writes the tables to ``kernel-times.txt``: the two
CUTLASS GEMMs against the glue's launches, to tell the GEMMs' own time from what surrounds them.
"""

from __future__ import annotations

import torch
from torch.profiler import ProfilerActivity, profile

#: Forwards profiled (after as many unprofiled ones); times are per forward.
FORWARDS = 10


def kernel_times(kernel_cls, cfg, scheme_name: str, tokens: int) -> list[str]:
    """A table of one forward of ``kernel_cls`` on a random ``cfg`` layer in ``scheme_name`` at ``tokens`` tokens on
    CUDA: the total, then per kernel name its GPU time per forward, its share and its launches per forward."""
    from moe_core.presets import random_inputs, random_layer
    from moe_core.quant import scheme

    sch = scheme(scheme_name)
    kernel = kernel_cls(cfg, sch.weight_key, sch.activation_key)
    weights = kernel.prepare_weights(random_layer(cfg, sch, device="cuda"))
    x, routing = random_inputs(cfg, tokens, device="cuda", seed=tokens)
    for _ in range(FORWARDS):
        kernel.apply(x, weights, routing)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(FORWARDS):
            kernel.apply(x, weights, routing)
        torch.cuda.synchronize()
    per_name = [(e.key, e.device_time_total / FORWARDS, e.count / FORWARDS) for e in prof.key_averages() if e.device_time_total > 0]
    total = sum(t for _, t, _ in per_name)
    lines = [f"{kernel.backend_name} {scheme_name} {cfg.num_experts} experts H={cfg.hidden_size} I={cfg.intermediate_size} "
             f"top_k={cfg.top_k}, {tokens} tokens: {total:.1f} us of GPU time per forward in {sum(c for _, _, c in per_name):.0f} launches"]
    for key, t, count in sorted(per_name, key=lambda row: -row[1]):
        lines.append(f"  {t:9.1f} us  {100 * t / max(total, 1e-9):5.1f}%  x{count:<4g} {key[:100]}")
    return lines
