"""vLLM compatibility mode (``MOE_CORE_COMPAT=vllm``): the seeds' environment variables, their semantics.

The variables are translated, per quant family, into an :class:`EnvOverlay` the resolver applies
on top of the MOE_CORE_* settings: a forced backend, backends removed from automatic selection,
a restriction to some backends (with the seeds' error message when none of them qualifies), vetoes
that also bind explicit requests, or an immediate error. Precedence follows the seeds: FlashInfer,
then DeepGEMM, then Marlin, then AITER; a LoRA layer ignores them all (fp8 and int8). Backend
names are moe-core's lowercase names of the seeds' enums (docs/vllm-compat.md has the table).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from moe_core.errors import InvalidEnvironmentError
from moe_core.quant import QuantFamily
from moe_core.spec import SupportQuery

FI_FP8 = "VLLM_USE_FLASHINFER_MOE_FP8"
FI_FP4 = "VLLM_USE_FLASHINFER_MOE_FP4"
FI_FP16 = "VLLM_USE_FLASHINFER_MOE_FP16"
FI_BACKEND = "VLLM_FLASHINFER_MOE_BACKEND"
DEEP_GEMM = "VLLM_USE_DEEP_GEMM"
MOE_DEEP_GEMM = "VLLM_MOE_USE_DEEP_GEMM"
FORCE_MARLIN = "VLLM_TEST_FORCE_FP8_MARLIN"
AITER = "VLLM_ROCM_USE_AITER"
AITER_MOE = "VLLM_ROCM_USE_AITER_MOE"
VARIABLES = [FI_FP8, FI_FP4, FI_FP16, FI_BACKEND, DEEP_GEMM, MOE_DEEP_GEMM, FORCE_MARLIN, AITER, AITER_MOE]

#: vLLM's defaults for the boolean variables when unset.
_DEFAULTS = {FI_FP8: False, FI_FP4: False, FI_FP16: False, DEEP_GEMM: True, MOE_DEEP_GEMM: True, FORCE_MARLIN: False, AITER: False, AITER_MOE: True}
_FI_MODES = ("latency", "throughput", "masked_gemm")

FP8_FLASHINFER = ("flashinfer_trtllm", "flashinfer_cutlass")
NVFP4_FLASHINFER = ("flashinfer_trtllm", "flashinfer_cutedsl", "flashinfer_cutedsl_batched", "flashinfer_cutlass", "flashinfer_b12x")
NVFP4_FI_MODE = {"latency": "flashinfer_trtllm", "throughput": "flashinfer_cutlass", "masked_gemm": "flashinfer_cutedsl"}


@dataclass(frozen=True)
class EnvOverlay:
    """What a compatibility mode adds to the MOE_CORE_* settings for one query."""

    force: str | None = None
    force_source: str = ""
    map_batched: bool = True  # whether a forced backend maps to its batched variant
    disable: tuple[tuple[str, str], ...] = ()  # (backend, why)
    only: tuple[str, ...] | None = None
    only_message: str = ""
    veto: tuple[tuple[str, str], ...] = ()  # (backend, why): binds explicit requests too


NO_OVERLAY = EnvOverlay()


def _flag(env: Mapping[str, str], name: str) -> bool:
    if name not in env:
        return _DEFAULTS[name]
    text = env[name].strip().lower()
    if text in ("1", "true"):
        return True
    if text in ("0", "false", ""):
        return False
    raise InvalidEnvironmentError(name, env[name], "vLLM reads this variable as a boolean", ("0", "1"))


def _fi_mode(env: Mapping[str, str]) -> str:
    mode = env.get(FI_BACKEND, "latency").strip().lower()
    if mode not in _FI_MODES:
        raise InvalidEnvironmentError(FI_BACKEND, env[FI_BACKEND], "unknown FlashInfer MoE backend", _FI_MODES)
    return mode


def overlay(env: Mapping[str, str], query: SupportQuery) -> EnvOverlay:
    """The seeds' reading of the vLLM variables for this query's quant family."""
    family = query.family
    if family is QuantFamily.FP8:
        return _fp8(env, query)
    if family is QuantFamily.NVFP4:
        return _nvfp4(env, query)
    if family is QuantFamily.UNQUANTIZED:
        return _unquantized(env)
    return NO_OVERLAY


def _disabled(names, why: str) -> tuple[tuple[str, str], ...]:
    return tuple((n, why) for n in names)


def _fp8(env: Mapping[str, str], query: SupportQuery) -> EnvOverlay:
    if query.config.lora_enabled:
        return NO_OVERLAY  # the seeds return the LoRA-capable Triton backend before reading any variable
    disable: tuple[tuple[str, str], ...] = ()
    if FI_FP8 in env:
        if not _flag(env, FI_FP8):
            disable += _disabled(FP8_FLASHINFER, f"{FI_FP8}=0")
        elif FI_BACKEND in env:
            mode = _fi_mode(env)
            if mode == "masked_gemm":
                raise InvalidEnvironmentError(FI_BACKEND, env[FI_BACKEND], "FlashInfer MaskedGEMM not supported for FP8", ("latency", "throughput"))
            target = "flashinfer_trtllm" if mode == "latency" else "flashinfer_cutlass"
            return EnvOverlay(force=target, force_source=f"{FI_FP8}=1 and {FI_BACKEND}={mode}")
        else:
            return EnvOverlay(only=FP8_FLASHINFER, only_message=f"Found {FI_FP8}=1, but no FlashInfer FP8 MoE backend supports the configuration")
    if DEEP_GEMM in env or MOE_DEEP_GEMM in env:
        if not _flag(env, DEEP_GEMM) or not _flag(env, MOE_DEEP_GEMM):
            disable += _disabled(("deepgemm", "batched_deepgemm"), f"{DEEP_GEMM}/{MOE_DEEP_GEMM}=0")
        else:
            return EnvOverlay(force="deepgemm", force_source=f"{DEEP_GEMM}/{MOE_DEEP_GEMM}=1", disable=disable)
    if _flag(env, FORCE_MARLIN):
        return EnvOverlay(force="marlin", force_source=f"{FORCE_MARLIN}=1", disable=disable)
    if AITER in env or AITER_MOE in env:
        if not _flag(env, AITER) or not _flag(env, AITER_MOE):
            disable += _disabled(("aiter",), f"{AITER}/{AITER_MOE}=0")
        else:
            return EnvOverlay(force="aiter", force_source=f"{AITER}=1 and {AITER_MOE}=1", disable=disable)
    return EnvOverlay(disable=disable)


def _nvfp4(env: Mapping[str, str], query: SupportQuery) -> EnvOverlay:
    disable: tuple[tuple[str, str], ...] = ()
    if FI_FP4 in env and not _flag(env, FI_FP4):
        disable = _disabled(NVFP4_FLASHINFER, f"{FI_FP4}=0")
    elif FI_FP4 in env:
        if FI_BACKEND in env:
            mode = _fi_mode(env)
            # The seeds do not map this forced backend to its batched variant.
            return EnvOverlay(force=NVFP4_FI_MODE[mode], force_source=f"{FI_FP4}=1 and {FI_BACKEND}={mode}", map_batched=False)
        return EnvOverlay(only=NVFP4_FLASHINFER, only_message=f"Found {FI_FP4}=1, but no FlashInfer NVFP4 MoE backend supports the configuration")
    if _flag(env, FORCE_MARLIN):
        return EnvOverlay(force="marlin", force_source=f"{FORCE_MARLIN}=1", disable=disable)
    return EnvOverlay(disable=disable)


def _unquantized(env: Mapping[str, str]) -> EnvOverlay:
    disable: tuple[tuple[str, str], ...] = ()
    if not _flag(env, FI_FP16):
        disable += _disabled(("flashinfer_trtllm", "flashinfer_cutlass"), f"{FI_FP16} is not 1")
    elif _fi_mode(env) != "latency":
        disable += _disabled(("flashinfer_trtllm",), f"{FI_BACKEND} is not 'latency'")
    veto = ()
    if not (_flag(env, AITER) and _flag(env, AITER_MOE)):
        veto = (("aiter", f"ROCm AITER MoE is not enabled ({AITER}=1 and {AITER_MOE}=1 enable it)"),)
    return EnvOverlay(disable=disable, veto=veto)
