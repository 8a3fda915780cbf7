"""The decisions of the seeds' four selection functions, restated as executable rules over scenarios.

Each function takes a :class:`Scenario` and returns ("ok", backend) or ("value" | "notimpl",
message fragment): the backend the seed returns, or the exception class it raises (ValueError or
NotImplementedError) with the part of its message a user needs. Known, documented divergences of
moe-core (docs/vllm-compat.md) are outside the scenarios these are called with.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tests.parity.seed_backends import BATCHED, CLAMP, FP8_ORDER, NVFP4_ORDER

FI_FP8 = ("flashinfer_trtllm", "flashinfer_cutlass")
FI_NVFP4 = ("flashinfer_trtllm", "flashinfer_cutedsl", "flashinfer_cutedsl_batched", "flashinfer_cutlass")
NVFP4_NAMES = set(NVFP4_ORDER) | {"flashinfer_b12x"}
FI_MODE_NVFP4 = {"latency": "flashinfer_trtllm", "throughput": "flashinfer_cutlass", "masked_gemm": "flashinfer_cutedsl"}


@dataclass(frozen=True)
class Scenario:
    supported: frozenset[str]
    env: tuple[tuple[str, str], ...] = ()
    lora: bool = False
    clamp: bool = False
    batched: bool = False
    moe_backend: str = "auto"
    allow_vllm_cutlass: bool = False
    platform: str = "h100"
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    def flag(self, name: str, default: bool) -> bool:
        env = dict(self.env)
        return default if name not in env else env[name] in ("1", "true")

    def is_set(self, name: str) -> bool:
        return name in dict(self.env)

    def value(self, name: str, default: str = "") -> str:
        return dict(self.env).get(name, default)


def _format_ok(s: Scenario, backend: str) -> bool:
    return (backend in BATCHED) == s.batched


def select_fp8(s: Scenario):
    """select_fp8_moe_backend; kernels that cannot apply a SwiGLU clamp report the layer unsupported."""
    def ok(b):
        return b in s.supported and _format_ok(s, b) and (not s.clamp or b in CLAMP)

    def forced(b):
        return ("ok", b) if ok(b) else ("value", "does not support")

    if s.lora:
        return ("ok", "triton")
    available = list(FP8_ORDER)
    if s.is_set("VLLM_USE_FLASHINFER_MOE_FP8"):
        if not s.flag("VLLM_USE_FLASHINFER_MOE_FP8", False):
            available = [b for b in available if b not in FI_FP8]
        elif s.is_set("VLLM_FLASHINFER_MOE_BACKEND"):
            mode = s.value("VLLM_FLASHINFER_MOE_BACKEND")
            if mode == "masked_gemm":
                return ("value", "FlashInfer MaskedGEMM not supported for FP8")
            return forced("flashinfer_trtllm" if mode == "latency" else "flashinfer_cutlass")
        else:
            for b in FI_FP8:
                if ok(b):
                    return ("ok", b)
            return ("notimpl", "Found VLLM_USE_FLASHINFER_MOE_FP8=1, but no FlashInfer FP8 MoE backend supports the configuration")
    if s.is_set("VLLM_USE_DEEP_GEMM") or s.is_set("VLLM_MOE_USE_DEEP_GEMM"):
        if not s.flag("VLLM_USE_DEEP_GEMM", True) or not s.flag("VLLM_MOE_USE_DEEP_GEMM", True):
            available = [b for b in available if b not in ("deepgemm", "batched_deepgemm")]
        else:
            return forced("batched_deepgemm" if s.batched else "deepgemm")
    if s.flag("VLLM_TEST_FORCE_FP8_MARLIN", False):
        return forced("marlin")
    if s.is_set("VLLM_ROCM_USE_AITER") or s.is_set("VLLM_ROCM_USE_AITER_MOE"):
        if not s.flag("VLLM_ROCM_USE_AITER", False) or not s.flag("VLLM_ROCM_USE_AITER_MOE", True):
            available = [b for b in available if b != "aiter"]
        else:
            return forced("aiter")
    if not s.allow_vllm_cutlass:
        available = [b for b in available if b not in ("vllm_cutlass", "batched_vllm_cutlass")]
    for b in available:
        if ok(b):
            return ("ok", b)
    return ("notimpl", "No MoE backend supports the deployment configuration")


def select_nvfp4(s: Scenario):
    """select_nvfp4_moe_backend, with deviation D3 of docs/vllm-compat.md (a forced Marlin never skips the clamp)."""
    def ok(b):
        return b in s.supported and _format_ok(s, b)

    def forced(b):
        if s.clamp and b not in CLAMP:  # D3: the seed returns Marlin without applying swiglu_limit
            return ("value", "does not apply the SwiGLU clamp")
        return ("ok", b) if ok(b) else ("value", "does not support")

    available = [b for b in NVFP4_ORDER if not s.clamp or b in CLAMP]
    if s.moe_backend != "auto":
        if s.moe_backend not in NVFP4_NAMES:
            return ("value", s.moe_backend)
        requested = s.moe_backend
        if s.batched and requested == "flashinfer_cutedsl":
            requested = "flashinfer_cutedsl_batched"
        if s.clamp and requested not in CLAMP:
            return ("value", "does not apply the SwiGLU clamp")
        return forced(requested)
    if s.is_set("VLLM_USE_FLASHINFER_MOE_FP4"):
        if not s.flag("VLLM_USE_FLASHINFER_MOE_FP4", False):
            available = [b for b in available if b not in FI_NVFP4]
        elif s.is_set("VLLM_FLASHINFER_MOE_BACKEND"):
            b = FI_MODE_NVFP4[s.value("VLLM_FLASHINFER_MOE_BACKEND")]
            if s.clamp and b not in CLAMP:
                return ("value", "does not apply the SwiGLU clamp")
            return forced(b)
        else:
            for b in FI_NVFP4:
                if (not s.clamp or b in CLAMP) and ok(b):
                    return ("ok", b)
            return ("notimpl", "Found VLLM_USE_FLASHINFER_MOE_FP4=1, but no FlashInfer NVFP4 MoE backend supports the configuration")
    if s.flag("VLLM_TEST_FORCE_FP8_MARLIN", False):
        return forced("marlin")
    for b in available:
        if ok(b):
            return ("ok", b)
    return ("notimpl", "No MoE backend supports the deployment configuration")


def select_int8(s: Scenario):
    """select_int8_moe_backend (its only backend is Triton; no batched int8 kernel)."""
    def ok(b):
        return b in s.supported and _format_ok(s, b) and (not s.clamp or b in CLAMP)

    if s.lora:
        return ("ok", "triton")
    if s.moe_backend != "auto":
        if s.moe_backend != "triton":
            return ("value", s.moe_backend)
        return ("ok", "triton") if ok("triton") else ("value", "does not support")
    return ("ok", "triton") if ok("triton") else ("notimpl", "No MoE backend supports the deployment configuration")


@dataclass(frozen=True)
class UnquantizedScenario:
    """The inputs select_unquantized_moe_backend reads besides the config's format."""

    platform: str  # h100, a100, mi300x, xpu, cpu
    has_flashinfer: bool
    trtllm_supported: bool
    has_cutlass: bool
    use_ep: bool
    use_dp: bool
    env: tuple[tuple[str, str], ...] = ()
    moe_backend: str = "auto"

    def flag(self, name: str, default: bool) -> bool:
        env = dict(self.env)
        return default if name not in env else env[name] in ("1", "true")

    @property
    def trtllm_available(self) -> bool:
        # is_supported_config_trtllm_bf16 answers for CUDA GPUs only
        return self.has_flashinfer and self.trtllm_supported and self.platform in ("h100", "a100")

    @property
    def cutlass_available(self) -> bool:
        return self.has_cutlass and self.use_ep and not self.use_dp and self.platform == "h100"

    def supported(self) -> frozenset[str]:
        """What each seed backend's availability check says, as the parity plugin's data."""
        out = set()
        if self.platform in ("h100", "a100", "mi300x"):
            out.add("triton")
        if self.platform == "mi300x":
            out.add("aiter")
        if self.platform in ("h100", "a100"):
            out |= {"flashinfer_trtllm"} if self.trtllm_available else set()
            out |= {"flashinfer_cutlass"} if self.cutlass_available else set()
        out |= {"xpu"} if self.platform == "xpu" else set()
        out |= {"cpu_native"} if self.platform == "cpu" else set()
        return frozenset(out)


def select_unquantized(s: UnquantizedScenario):
    """select_unquantized_moe_backend."""
    fp16 = s.flag("VLLM_USE_FLASHINFER_MOE_FP16", False)
    latency = dict(s.env).get("VLLM_FLASHINFER_MOE_BACKEND", "latency") == "latency"
    aiter_enabled = s.flag("VLLM_ROCM_USE_AITER", False) and s.flag("VLLM_ROCM_USE_AITER_MOE", True)
    if s.moe_backend != "auto":
        if s.moe_backend not in ("triton", "flashinfer_trtllm", "flashinfer_cutlass", "aiter"):
            return ("value", s.moe_backend)
        if s.moe_backend == "flashinfer_trtllm" and not s.trtllm_available:
            return ("value", "does not support")
        if s.moe_backend == "flashinfer_cutlass" and not s.cutlass_available:
            return ("value", "does not support")
        if s.moe_backend == "aiter" and not (s.platform == "mi300x" and aiter_enabled):
            return ("value", "does not support")
        return ("ok", s.moe_backend)
    if s.platform == "mi300x":
        return ("ok", "aiter" if aiter_enabled else "triton")
    if s.platform in ("h100", "a100"):
        if s.trtllm_available and fp16 and latency:
            return ("ok", "flashinfer_trtllm")
        if s.cutlass_available and fp16:
            return ("ok", "flashinfer_cutlass")
        return ("ok", "triton")
    return ("ok", "xpu" if s.platform == "xpu" else "cpu_native")
