"""Experiment: where the host time of one eager Triton forward goes.

Run on a GPU: python benchmarks/host_overhead.py
Host time of each piece (``moe_core.bench.timing.host_time``: GPU idle before each call, median):
a bare Triton launch with 2 and with 30 arguments (through triton, and through the plugin's
direct-launch ``Launcher``), torch allocations, and for Qwen3-30B-A3B the MoELayer call,
``kernel.apply``, ``forward``, validation, selection, the cached per-token-count GEMM launches,
block table, top-k sum and the routing counter's poll and snapshot.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from moe_core.bench.timing import host_time
from moe_core.kernel import full_checks_enabled
from moe_core.layer import MoELayer
from moe_core.presets import model, random_inputs, random_layer
from moe_core.quant import scheme
from moe_core_triton.blocks import standard_table
from moe_core_triton.launch import Launcher
from moe_core_triton.reduce import topk_sum


@triton.jit
def _two_args(p, n):
    pass


@triton.jit
def _thirty_args(a, b, c, d, e, f, g, h, i, j, n1, n2, n3, n4, n5, n6, n7, n8, n9, n10, n11, n12, n13, n14, n15, n16, n17, n18, n19, n20,
                 C1: tl.constexpr, C2: tl.constexpr, C3: tl.constexpr, C4: tl.constexpr, C5: tl.constexpr,
                 C6: tl.constexpr, C7: tl.constexpr, C8: tl.constexpr, C9: tl.constexpr, C10: tl.constexpr):
    pass


def _us(fn) -> float:
    return round(host_time(fn, repeats=200) * 1e6, 1)


def main() -> None:
    x = torch.zeros(1024, device="cuda")
    print("launch, 2 args", _us(lambda: _two_args[(1,)](x, 5)))
    print("launch, 30 args + 10 constexpr", _us(lambda: _thirty_args[(1,)](*([x] * 10), *range(3, 23), *range(10))))
    direct = Launcher(_thirty_args, num_warps=4, **{f"C{i + 1}": i for i in range(10)})
    print("Launcher, 30 args + 10 constexpr", _us(lambda: direct((1,), *([x] * 10), *range(3, 23))))
    print("torch.empty", _us(lambda: torch.empty(1000, device="cuda")))
    print("torch.zeros", _us(lambda: torch.zeros(1000, device="cuda")))
    print("full_checks_enabled", _us(full_checks_enabled))
    for name, tokens in (("unquantized", 1), ("fp8-block", 1), ("unquantized", 4096)):
        cfg, sch = model("qwen3-30b-a3b").config(), scheme(name)
        layer = MoELayer(cfg, random_layer(cfg, sch, device="cuda"), sch.weight_key, sch.activation_key, environ={"MOE_CORE_BACKEND": "triton"})
        kernel, weights = layer._kernels["triton"]
        hidden, routing = random_inputs(cfg, tokens, device="cuda", seed=1)
        rows = torch.randn(tokens * cfg.top_k, cfg.hidden_size, device="cuda", dtype=torch.bfloat16)
        first = kernel._gemm_launches(hidden.device, tokens * cfg.top_k, tokens, True, False)[0].config
        parts = {
            "layer": lambda: layer(hidden, routing),
            "apply": lambda: kernel.apply(hidden, weights, routing),
            "forward": lambda: kernel.forward(hidden, weights, routing, expert_map=None, apply_router_weight_on_input=False),
            "validate": lambda: kernel.validate_inputs(hidden, weights, routing, None, False),
            "select": lambda: layer._select(tokens),
            "gemm_launches": lambda: kernel._gemm_launches(hidden.device, tokens * cfg.top_k, tokens, True, False),
            "table": lambda: standard_table(routing.topk_ids, cfg.num_experts, cfg.num_experts, first.BLOCK_M, None, kernel.routing_errors),
            "topk_sum": lambda: topk_sum(rows, routing.topk_ids, cfg.num_experts, cfg.num_experts, None),
            "poll": kernel.routing_errors.poll,
            "snapshot": kernel.routing_errors.snapshot,
        }
        print(f"qwen3-30b-a3b {name} T={tokens}", {part: _us(fn) for part, fn in parts.items()}, flush=True)


if __name__ == "__main__":
    main()
