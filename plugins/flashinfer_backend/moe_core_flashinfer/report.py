"""What ``moe-core doctor`` (through the ``moe_core_doctor`` hook) and ``python -m moe_core_flashinfer``
print for this plugin: FlashInfer's version, the JIT toolchains here, the state of each JIT-built
nvcc module on this GPU, and whether each backend can run on this machine and why not.

One function, :func:`lines`, serves both; every part is isolated, so one failing fact becomes a line
saying so and never hides the rest.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterable

#: The layer the per-backend verdicts are asked about (a Qwen3-30B-A3B-like bfloat16 MoE layer).
LAYER = dict(num_experts=128, top_k=8, hidden_size=2048, intermediate_size=768)


def _guarded(part: Callable[[], Iterable[str]], what: str) -> list[str]:
    try:
        return list(part())
    except Exception as exc:  # noqa: BLE001 - a report line, never a crash of doctor
        return [f"({what} failed: {type(exc).__name__}: {exc})"]


def version_lines() -> list[str]:
    """FlashInfer's installed version (read from metadata: FlashInfer is not imported) and this plugin's range."""
    from moe_core_flashinfer import contract, facts

    version = facts.version()
    return [f"flashinfer-python: {version or 'not installed'} (this plugin was read from {contract.TESTED_VERSION}; "
            f"range {contract.VERSION_RANGE})"]


def toolchain_lines() -> list[str]:
    """Each toolchain of :func:`facts.toolchains`: usable or missing, and what was found."""
    from moe_core_flashinfer import facts

    return ["JIT toolchains:"] + [f"  {t.name:<12} {'usable' if t.usable else 'missing'}: {t.detail}" for t in facts.toolchains().values()]


def jit_module_lines(platform) -> list[str]:
    """The state of every JIT-built module on this machine's GPU (only a real CUDA platform has one)."""
    from moe_core_flashinfer import facts

    if platform.simulated or not platform.is_cuda() or platform.capability is None:
        return [f"JIT-built modules: not checked on {platform.describe()} (they are checked on the machine with the GPU)"]
    if facts.version() is None:
        return ["JIT-built modules: FlashInfer is not installed"]
    arch = facts.arch(platform)
    out = [f"JIT-built modules for sm_{arch}:"]
    for family in sorted(facts.JIT_MODULES):
        state = facts.jit_state(family, arch)
        out.append(f"  {family:<8} " + ("builds no module on this architecture" if state is None else state.describe()))
    return out


def backend_lines(registry, platform) -> list[str]:
    """For every backend and scheme of this plugin: runnable on ``platform`` or not, with the registry's reasons."""
    import torch

    from moe_core.config import ActivationFormat, MoEConfig, ParallelConfig
    from moe_core.quant import scheme
    from moe_core.spec import SupportQuery

    from moe_core_flashinfer import contract, specs

    cfg = MoEConfig(**LAYER, dtype=torch.bfloat16)
    out = [f"backends on {platform.describe()} (a {LAYER['num_experts']}-expert, top-{LAYER['top_k']}, H={LAYER['hidden_size']}, "
           f"I={LAYER['intermediate_size']} bfloat16 layer):"]
    for spec in specs.SPECS:
        if spec.name not in registry.specs:
            out.append(f"  {spec.name:<28} not registered (plugin denied or not loaded)")
            continue
        batched = ParallelConfig(use_batched_activation_format=ActivationFormat.BATCHED_EXPERTS in spec.formats)
        query_cfg = dataclasses.replace(cfg, parallel=batched)
        for name in contract.BINDINGS[spec.name]:
            sch = scheme(name)

            def verdict(spec=spec, sch=sch) -> list[str]:
                v = registry.supports(registry.specs[spec.name], SupportQuery(query_cfg, sch.weight_key, sch.activation_key, platform))
                return [f"{'runnable' if v.ok else 'no'}: {v.explain()}"]

            out.append(f"  {spec.name:<28} {name:<15} " + " ".join(_guarded(verdict, "supports")))
    return out


def lines(registry=None, platform=None) -> list[str]:
    """The whole report (``registry`` / ``platform`` default to the process's own)."""
    from moe_core.registry import default_registry
    from moe_core.resolver import current_platform

    platform = platform if platform is not None else current_platform()
    registry = registry if registry is not None else default_registry()
    return (_guarded(version_lines, "reading FlashInfer's version") + _guarded(toolchain_lines, "probing toolchains")
            + _guarded(lambda: jit_module_lines(platform), "reading FlashInfer's JIT cache")
            + _guarded(lambda: backend_lines(registry, platform), "asking the backends"))
