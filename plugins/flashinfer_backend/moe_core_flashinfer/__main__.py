"""``python -m moe_core_flashinfer``: FlashInfer's version, the JIT toolchains usable here, and which
FlashInfer backends would run on this machine (the part of ``moe-core doctor`` only this plugin knows).
"""

from __future__ import annotations

import sys


def main() -> int:
    import dataclasses

    from moe_core.config import ActivationFormat, MoEConfig, ParallelConfig
    from moe_core.registry import default_registry
    from moe_core.resolver import current_platform
    from moe_core.spec import SupportQuery
    from moe_core.quant import scheme
    import torch

    from moe_core_flashinfer import contract, facts, plugin

    version = facts.version()
    print(f"flashinfer-python: {version or 'not installed'} (this plugin was read from {contract.TESTED_VERSION}; range {contract.VERSION_RANGE})")
    print("JIT toolchains:")
    for tool in facts.toolchains().values():
        print(f"  {tool.name:<12} {'usable' if tool.usable else 'missing'}: {tool.detail}")
    platform = current_platform()
    reg = default_registry()
    print(f"backends on {platform.describe()} (a 128-expert, top-8, H=2048, I=768 bfloat16 layer):")
    cfg = MoEConfig(num_experts=128, top_k=8, hidden_size=2048, intermediate_size=768, dtype=torch.bfloat16)
    for spec in plugin.SPECS:
        if spec.name not in reg.specs:
            print(f"  {spec.name:<28} not registered (plugin denied or not loaded)")
            continue
        for name in contract.BINDINGS[spec.name]:
            sch = scheme(name)
            batched = ParallelConfig(use_batched_activation_format=ActivationFormat.BATCHED_EXPERTS in spec.formats)
            query_cfg = dataclasses.replace(cfg, parallel=batched)
            verdict = reg.supports(reg.specs[spec.name], SupportQuery(query_cfg, sch.weight_key, sch.activation_key, platform))
            print(f"  {spec.name:<28} {name:<15} {'runnable' if verdict.ok else 'no'}: {verdict.explain()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
