"""The declaration of ``triton_ws_sm90``: the warp-specialized Gluon decode layer (ws_decode.py) on Hopper.

Validated on an H200 (:data:`VALIDATION`) and ranked below ``triton``, whose support covers all of its own: automatic
selection picks it only where a measured ranking puts it first (the H200's: Qwen3-30B-A3B bf16 at 1 and 3 to 11 tokens,
docs/benchmarks/gluon-decode-h200.md); ``MOE_CORE_BACKEND=triton_ws_sm90`` (or a layer's explicit backend) runs it
anywhere it is supported. Forwards the decode kernel does not take (more than :data:`DECODE_MAX_TOKENS` tokens, the
router weight on the input, a deterministic kernel) run the ``triton`` backend's kernels.
"""

from __future__ import annotations

import functools

import torch

from moe_core.config import Activation, ActivationFormat
from moe_core.platform import DeviceKind
from moe_core.quant import scheme
from moe_core.spec import BackendSpec, Validation
from moe_core.support import Support
from moe_core_triton.ws_plan import size_problems

#: Token counts the decode kernel is written for; longer forwards run the ``triton`` backend's kernels.
DECODE_MAX_TOKENS = 64
#: The triton release (major, minor) whose Gluon API the kernel is written against: Gluon changes between releases.
GLUON_RELEASE = (3, 6)
#: The only architecture it compiles for: wgmma, TMA and setmaxnreg are Hopper's (sm_90).
ARCHITECTURE = (9, 0)
#: Where ``python -m moe_core_triton.gluon_check`` last passed every check on an sm_90 GPU.
VALIDATION = Validation(
    hardware="NVIDIA H200", provider="triton 3.6.0, torch 2.11.0+cu130", date="2026-12-03",
    log="docs/benchmarks/raw/2026-12-03-gluon-decode-h200/gluon_check.txt",
)

WS_SM90 = BackendSpec(
    name="triton_ws_sm90", family="triton", priority=400, schemes=[scheme("unquantized")],
    kernel="moe_core_triton.ws_kernel:WarpSpecializedKernel", formats=frozenset({ActivationFormat.STANDARD}),
    devices=frozenset({DeviceKind.CUDA}), requires=frozenset({"triton"}), supports_expert_map=False,
    description="moe-core's warp-specialized Gluon MoE for sm_90 decode: TMA producer warp, wgmma consumer warpgroup (bf16/fp16)",
    validation=VALIDATION,
)


def release_reason(version: str, has_gluon: bool) -> str | None:
    """Why triton ``version`` (with or without an importable Gluon for Hopper) cannot build the kernel; None when it can."""
    release = tuple(int(part) for part in version.split(".")[:2] if part.isdigit())
    if release != GLUON_RELEASE:
        return f"its Gluon kernel is written for triton {GLUON_RELEASE[0]}.{GLUON_RELEASE[1]}.x (Gluon's API changes between releases), this is triton {version}"
    if not has_gluon:
        return f"triton {version} has no triton.experimental.gluon for Hopper"
    return None


@functools.lru_cache(maxsize=1)
def installed_triton_reason() -> str | None:
    """:func:`release_reason` for the installed triton (imported here, once); None when it can build the kernel."""
    try:
        import triton
    except ImportError:
        return "triton is not importable"
    try:
        import triton.experimental.gluon.language.nvidia.hopper  # noqa: F401
    except ImportError:
        return release_reason(triton.__version__, has_gluon=False)
    return release_reason(triton.__version__, has_gluon=True)


def supports(backend, config, weight_key, activation_key, platform) -> Support:
    """What the warp-specialized decode kernel cannot do for this layer on this platform."""
    reasons = []
    if config.dtype not in (torch.float16, torch.bfloat16):
        reasons.append(f"it computes in float16/bfloat16, not {config.dtype_name}")
    if config.activation is not Activation.SILU:
        reasons.append(f"it applies SiLU only, not {config.activation.value}")
    if platform.is_cuda() and platform.capability != ARCHITECTURE:
        have = f"sm_{platform.capability[0]}{platform.capability[1]}" if platform.capability else "an unknown architecture"
        reasons.append(f"it is built for sm_90 only (wgmma, TMA, setmaxnreg), this is {have}")
    if "triton" in platform.packages and not platform.simulated:  # a simulated GPU's triton is not the one installed here
        reasons += [r for r in (installed_triton_reason(),) if r]
    reasons += size_problems(config.hidden_size, config.intermediate_size, itemsize=2)  # 16-bit weights
    return Support.from_reasons(reasons)
