"""Registers FlashInfer's fused-MoE backends: ``flashinfer_trtllm``, ``flashinfer_cutlass``,
``flashinfer_cutedsl`` (+ ``flashinfer_cutedsl_batched``), ``flashinfer_b12x`` (requested only) and
``flashinfer_cutile``.

Priorities follow the seeds' per-family orders (tests/parity/seed_backends.py): fp8
aiter > flashinfer_trtllm > flashinfer_cutlass > deepgemm > ... > triton; nvfp4 flashinfer_trtllm >
flashinfer_cutedsl > flashinfer_cutedsl_batched > flashinfer_cutlass; unquantized
flashinfer_trtllm > flashinfer_cutlass > aiter > triton. ``flashinfer_cutile`` is in no seed order:
it ranks just below triton until a measured ranking (docs/ranking.md) promotes it. Only
``flashinfer_trtllm`` applies the SwiGLU clamp among the seeds' FlashInfer backends; cuTile's
SwiGLU ``limit`` has moe-core's clamp semantics, so ``flashinfer_cutile`` applies it too.

Whether a backend runs on a GPU is FlashInfer's own ``supported(arch)`` answer for the config the
scheme binds (:mod:`moe_core_flashinfer.contract`); on the real machine (not a simulated preset)
the toolchain that builds its kernels must be usable too, and a backend whose runner JIT-builds an
nvcc module (CUTLASS, TRT-LLM) runs only once that module is prebuilt or built
(:func:`moe_core_flashinfer.facts.jit_state`; ``python -m moe_core_flashinfer build cutlass`` builds it).
``moe_core_doctor`` reports FlashInfer's version, toolchains and modules (:mod:`moe_core_flashinfer.report`).
"""

from __future__ import annotations

import torch

from moe_core.config import Activation
from moe_core.hookspecs import backend_hooks, hookimpl
from moe_core.quant import scheme_for_keys
from moe_core.support import Support

from moe_core_flashinfer import contract, facts
from moe_core_flashinfer.contract import BINDINGS
from moe_core_flashinfer.specs import SPECS


@hookimpl
def moe_core_doctor():
    """FlashInfer's version, the toolchains here, each module's build state and what runs on this machine."""
    from moe_core_flashinfer import report

    return report.lines()


def _supports(backend, config, weight_key, activation_key, platform) -> Support:
    """FlashInfer's own facts (arch, limits, activations), then the toolchain and JIT module on the real machine."""
    binding = BINDINGS[backend.name][scheme_for_keys(weight_key, activation_key).name]
    reasons, notes = [], []
    if config.dtype is not torch.bfloat16:
        reasons.append(f"FlashInfer's unified MoE API takes and returns bfloat16 activations; this layer computes in {config.dtype_name}")
    try:
        reasons += _flashinfer_reasons(backend.name, binding, config, platform)
    except facts.FlashInferUnavailableError as exc:
        return Support.no(f"FlashInfer's support facts need the package itself: {exc}")
    if not platform.simulated and platform.is_cuda():
        try:
            machine_reasons, notes = _machine_reasons(binding, facts.arch(platform))
        except facts.FlashInferUnavailableError as exc:
            return Support.no(f"FlashInfer's JIT facts need the package itself: {exc}")
        reasons += machine_reasons
    return Support.from_reasons(reasons) if reasons else Support.yes(*notes)


def _machine_reasons(binding: contract.Binding, arch: int | None) -> tuple[list[str], list[str]]:
    """(reasons, notes) about this machine: its toolchains and, for JIT-built bindings, whether the module is built.

    A JIT-built binding whose nvcc module is neither prebuilt nor in FlashInfer's JIT cache is refused:
    its first call would compile it (248 compile units for CUTLASS on sm_90), which automatic selection
    must never start unannounced. A built module needs no compiler, so nvcc is then not asked for.
    """
    jit_built = bool(binding.jit_module) and arch is not None and facts.supported(binding.config, arch)  # else refused by arch
    state = facts.jit_state(binding.jit_module, arch) if jit_built else None
    missing = facts.missing_toolchains(binding)
    if state is not None:  # the module's state says everything nvcc would (jit_state names a missing nvcc as its blocker)
        missing = [m for m in missing if not m.startswith("nvcc:")]
    notes = [m for m in missing if m.startswith("cubins:")]
    reasons = [f"cannot build its kernels here: {m}" for m in missing if not m.startswith("cubins:")]
    if state is not None and not state.ready:
        reasons.append(state.reason())
    return reasons, notes


def _flashinfer_reasons(name: str, binding: contract.Binding, config, platform) -> list[str]:
    """Reasons from FlashInfer's own facts: architecture, activations, kernel limits."""
    reasons = []
    arch = facts.arch(platform)
    if arch is None or not facts.supported(binding.config, arch):
        have = "an unknown compute capability" if arch is None else f"sm_{arch}"
        runs = ", ".join(f"sm_{a}" for a in facts.supported_archs(binding.config))
        reasons.append(f"FlashInfer {facts.version()} ships {binding.config} for {runs} only ({binding.config}.supported), not {have}")
    activation = contract.ACTIVATIONS[config.activation.value]
    if binding.config.startswith("CuTile"):
        if facts.activation_type_name(activation) not in facts.cutile_activations():
            reasons.append(f"FlashInfer's cuTile kernels do not implement {activation} ({config.activation.value})")
    elif config.activation is not Activation.SILU:
        reasons.append(f"this plugin binds {binding.config} with SwiGLU (silu) only, not {config.activation.value}")
    if config.swiglu_limit is not None and activation != contract.CLAMPED_ACTIVATION:
        reasons.append(f"swiglu_limit needs FlashInfer's {contract.CLAMPED_ACTIVATION}; {activation} ({config.activation.value}) has no clamp")
    if binding.config.startswith("Trtllm"):
        max_top_k, max_experts = facts.trtllm_limits()
        if config.top_k > max_top_k:
            reasons.append(f"FlashInfer's TRT-LLM routed kernels take top_k <= {max_top_k}, not {config.top_k}")
        if config.num_experts > max_experts:
            reasons.append(f"FlashInfer's TRT-LLM routed kernels take at most {max_experts} experts, not {config.num_experts}")
    if binding.weights_in == "fp8":
        multiple = contract.CUTILE_FP8_MULTIPLE
        for field, size in (("hidden_size", config.hidden_size), ("intermediate_size", config.intermediate_size)):
            if size % multiple:
                reasons.append(f"{field}={size} is not a multiple of {multiple}, which {binding.config}.prepare_weights requires; pad it")
    return reasons


moe_core_backends, moe_core_supports = backend_hooks(SPECS, _supports)
