"""Registers ``deepep`` (normal mode, STANDARD format, prefill) and ``deepep_low_latency`` (BATCHED_EXPERTS,
CUDA-graph safe, decode) with moe-core's dispatcher registry.

Priorities: 95 and 94, below the built-in dispatchers (``naive`` is the lowest at 100,
moe_core/dispatch/builtin.py): an automatic choice takes them only where a measured dispatcher ranking
finds them faster; a request (``ParallelConfig.dispatch_backend``) always does. Validated on two H200s
(:data:`VALIDATION`): equality with the single-GPU layer and the low-latency pair's CUDA-graph replay.

What the answers below cannot see: whether the ranks are joined by NVLink (DeepEP's intranode kernels
need it; assumed, as no cheap check exists without touching the GPUs), and whether the installed
deep_ep was built with NVSHMEM (needed by the low-latency mode; the answer looks for the NVSHMEM
wheel or NVSHMEM_DIR, the places DeepEP's build takes it from). On a simulated platform, deep_ep's
presence is assumed: the simulated machines list only moe-core's own optional packages.
"""

from __future__ import annotations

import importlib.util
import os

import torch

from moe_core.config import ActivationFormat
from moe_core.dispatch.spec import DispatchSpec
from moe_core.hookspecs import hookimpl
from moe_core.platform import DeviceKind
from moe_core.spec import Validation
from moe_core.support import Support
from moe_core_deepep import contract, how_to_build

#: Equality with the single-GPU layer of both dispatchers (Qwen3-30B-A3B: skewed routing with an empty rank and an
#: invalid id, uneven random routing, fp8-block; Mixtral-8x7B: uneven random routing) and CUDA-graph replay of
#: deepep_low_latency, on two H200s (docs/benchmarks/deepep-h200x2.md).
VALIDATION = Validation(
    hardware="2x NVIDIA H200 (NV18), one rank per GPU", provider="DeepEP 1.2.1 (v1.2.1), NVSHMEM 3.4.5, torch 2.11.0+cu130",
    date="2026-11-28", log="docs/benchmarks/raw/2026-11-28-deepep-h200x2/shared-buffer-fix/check.log",
)

SPECS = (
    DispatchSpec(
        name="deepep", family="deepep", priority=95, output_format=ActivationFormat.STANDARD,
        implementation="moe_core_deepep.dispatcher:DeepEPDispatcher",
        host_sync=True,  # the receive counts reach the host before the buffers are sized
        cuda_graph_safe=False, world_sizes=contract.NORMAL_WORLD_SIZES, devices=frozenset({DeviceKind.CUDA}),
        validation=VALIDATION,
        description="DeepEP intranode normal mode over NVLink: each token once to each rank that needs it (prefill)",
    ),
    DispatchSpec(
        name="deepep_low_latency", family="deepep", priority=94, output_format=ActivationFormat.BATCHED_EXPERTS,
        implementation="moe_core_deepep.dispatcher:DeepEPLowLatencyDispatcher",
        host_sync=False, cuda_graph_safe=True, world_sizes=contract.LOW_LATENCY_WORLD_SIZES,
        devices=frozenset({DeviceKind.CUDA}), validation=VALIDATION,
        description="DeepEP low-latency mode over NVSHMEM: fixed per-expert buffers, bf16, needs max_tokens_per_rank (decode, CUDA graphs)",
    ),
)
_NAMES = {s.name for s in SPECS}


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _common_reasons(config, platform, min_capability: tuple[int, int]) -> list[str]:
    reasons = []
    if config.dtype is not torch.bfloat16:
        reasons.append(f"DeepEP's kernels move and sum bfloat16 rows; this layer computes in {config.dtype_name} (use dtype=bfloat16)")
    cap = platform.capability
    if cap is None or cap < min_capability:
        have = f"sm_{cap[0]}{cap[1]}" if cap else "an unknown compute capability"
        reasons.append(f"it needs sm_{min_capability[0]}{min_capability[1]} or newer; this is {have}")
    if not platform.simulated and not _importable("deep_ep"):
        reasons.append(f"deep_ep is not importable: {how_to_build()}")
    return reasons


def _normal_reasons(config) -> list[str]:
    reasons = []
    if config.hidden_size % contract.NORMAL_HIDDEN_MULTIPLE:
        reasons.append(f"hidden_size={config.hidden_size} must be a multiple of {contract.NORMAL_HIDDEN_MULTIPLE} (DeepEP copies 16-byte vectors)")
    if config.local_num_experts > contract.MAX_LOCAL_EXPERTS:
        reasons.append(f"{config.local_num_experts} local experts exceed DeepEP's {contract.MAX_LOCAL_EXPERTS}")
    return reasons


def _low_latency_reasons(config, platform) -> list[str]:
    reasons = []
    if config.hidden_size not in contract.LOW_LATENCY_HIDDEN_SIZES:
        sizes = ", ".join(map(str, sorted(contract.LOW_LATENCY_HIDDEN_SIZES)))
        reasons.append(f"DeepEP's low-latency kernels are compiled for hidden sizes {sizes}, not {config.hidden_size}")
    if config.top_k > contract.LOW_LATENCY_MAX_TOP_K:
        reasons.append(f"top_k={config.top_k} exceeds the low-latency kernels' {contract.LOW_LATENCY_MAX_TOP_K}")
    if not platform.simulated and not (_importable("nvidia.nvshmem") or os.environ.get("NVSHMEM_DIR")):
        reasons.append("the low-latency mode needs NVSHMEM: pip install nvidia-nvshmem-cu13 (or set NVSHMEM_DIR), "
                       f"then rebuild DeepEP ({how_to_build()})")
    return reasons


@hookimpl
def moe_core_dispatchers():
    return list(SPECS)


@hookimpl
def moe_core_dispatch_supports(dispatcher, config, weight_key, activation_key, platform):
    """dtype, architecture, DeepEP's compiled sizes and its presence; NVLink between the ranks is assumed."""
    if dispatcher.name not in _NAMES:
        return None
    if dispatcher.name == "deepep":
        reasons = _common_reasons(config, platform, contract.NORMAL_MIN_CAPABILITY) + _normal_reasons(config)
    else:
        reasons = _common_reasons(config, platform, contract.LOW_LATENCY_MIN_CAPABILITY) + _low_latency_reasons(config, platform)
    if reasons:
        return Support.no(*reasons)
    return Support.yes("the ranks are assumed to be joined by NVLink")


@hookimpl
def moe_core_doctor():
    """deep_ep importable or not (and how to build it), its version, and NVSHMEM for the low-latency mode."""
    from moe_core.platform import package_versions

    if _importable("nvidia.nvshmem"):
        nvshmem = "NVSHMEM: the nvidia.nvshmem wheel"
    elif os.environ.get("NVSHMEM_DIR"):
        nvshmem = f"NVSHMEM: NVSHMEM_DIR={os.environ['NVSHMEM_DIR']}"
    else:
        nvshmem = "NVSHMEM: not found, so deepep_low_latency cannot run (pip install nvidia-nvshmem-cu13, then rebuild DeepEP)"
    if not _importable("deep_ep"):
        return [f"deep_ep is not installed: {how_to_build()}", nvshmem]
    return [f"deep_ep: {package_versions('deep_ep') or 'version unknown'} (bound to {contract.UPSTREAM})", nvshmem]
