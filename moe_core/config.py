"""The description of one MoE layer: frozen, hashable and validated on construction."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field, fields

import torch

from moe_core.errors import InvalidConfigError

AUTO = "auto"


class Activation(enum.Enum):
    """Gated activation between the two expert GEMMs: act(gate) * up."""

    SILU = "silu"
    GELU = "gelu"


class ActivationFormat(enum.Enum):
    """How hidden states reach the experts.

    STANDARD: ``[tokens, hidden]`` with top-k expert ids and weights per token.
    BATCHED_EXPERTS: ``[experts, max_tokens, hidden]`` with a per-expert token count, as produced
    by expert-parallel dispatch.
    """

    STANDARD = "standard"
    BATCHED_EXPERTS = "batched_experts"


_DTYPES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}


def _positive_int(owner: str, name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InvalidConfigError(f"{owner}.{name} must be a positive int, got {value!r}")


@dataclass(frozen=True)
class ParallelConfig:
    """Parallel layout of the layer.

    Attributes:
        tp_size, ep_size, dp_size: tensor-, expert- and data-parallel sizes.
        use_batched_activation_format: True when tokens arrive in the BATCHED_EXPERTS format
            (expert-parallel dispatch); selects batched kernels. For an expert-parallel layer
            selected as a (dispatch, experts) pair (:func:`moe_core.select_pair`), True restricts
            the pair to the batched format and False lets the pair choose the format
            (docs/expert-parallel.md).
        dispatch_backend: ``"auto"`` or the name of a registered dispatch/combine backend to use
            exactly in an expert-parallel layer (beats ``MOE_CORE_DISPATCH``).
    """

    tp_size: int = 1
    ep_size: int = 1
    dp_size: int = 1
    use_batched_activation_format: bool = False
    dispatch_backend: str = AUTO

    def __post_init__(self) -> None:
        for name in ("tp_size", "ep_size", "dp_size"):
            _positive_int("ParallelConfig", name, getattr(self, name))
        if not isinstance(self.use_batched_activation_format, bool):
            raise InvalidConfigError("ParallelConfig.use_batched_activation_format must be a bool")
        if not isinstance(self.dispatch_backend, str) or not self.dispatch_backend.strip():
            raise InvalidConfigError(f"ParallelConfig.dispatch_backend must be 'auto' or a dispatcher name, got {self.dispatch_backend!r}")
        object.__setattr__(self, "dispatch_backend", self.dispatch_backend.strip().lower())

    @property
    def use_ep(self) -> bool:
        return self.ep_size > 1

    @property
    def use_dp(self) -> bool:
        return self.dp_size > 1

    @property
    def activation_format(self) -> ActivationFormat:
        return ActivationFormat.BATCHED_EXPERTS if self.use_batched_activation_format else ActivationFormat.STANDARD


@dataclass(frozen=True)
class MoEConfig:
    """One MoE layer, as the engine describes it to the resolver.

    Attributes:
        num_experts: experts in the whole layer (global, across expert-parallel ranks).
        top_k: experts each token is routed to (1 <= top_k <= num_experts).
        hidden_size: model dimension H.
        intermediate_size: per-expert FFN width I (w13 is [E, 2I, H], w2 is [E, H, I]).
        dtype: activation / output dtype (float32, float16 or bfloat16).
        activation: gated activation (silu or gelu).
        swiglu_limit: when set, the SwiGLU clamp: gate <= limit and -limit <= up <= limit.
        lora_enabled: LoRA adapters are applied on the experts; only LoRA-capable backends qualify.
        moe_backend: ``"auto"`` or the name of a registered backend to use exactly.
        parallel: parallel layout, see :class:`ParallelConfig`.
    """

    num_experts: int
    top_k: int
    hidden_size: int
    intermediate_size: int
    dtype: torch.dtype = torch.bfloat16
    activation: Activation = Activation.SILU
    swiglu_limit: float | None = None
    lora_enabled: bool = False
    moe_backend: str = AUTO
    parallel: ParallelConfig = field(default_factory=ParallelConfig)

    def __post_init__(self) -> None:
        for name in ("num_experts", "top_k", "hidden_size", "intermediate_size"):
            _positive_int("MoEConfig", name, getattr(self, name))
        if self.top_k > self.num_experts:
            raise InvalidConfigError(f"MoEConfig.top_k={self.top_k} exceeds num_experts={self.num_experts}")
        if self.dtype not in _DTYPES:
            raise InvalidConfigError(f"MoEConfig.dtype must be one of {', '.join(_DTYPES.values())}, got {self.dtype!r}")
        if isinstance(self.activation, str):
            try:
                object.__setattr__(self, "activation", Activation(self.activation))
            except ValueError:
                raise InvalidConfigError(
                    f"MoEConfig.activation={self.activation!r}; valid: {', '.join(a.value for a in Activation)}"
                ) from None
        if not isinstance(self.activation, Activation):
            raise InvalidConfigError(f"MoEConfig.activation must be an Activation, got {self.activation!r}")
        if self.swiglu_limit is not None:
            if isinstance(self.swiglu_limit, bool) or not isinstance(self.swiglu_limit, (int, float)):
                raise InvalidConfigError(f"MoEConfig.swiglu_limit must be a number or None, got {self.swiglu_limit!r}")
            if not math.isfinite(self.swiglu_limit) or self.swiglu_limit <= 0:
                raise InvalidConfigError(f"MoEConfig.swiglu_limit must be finite and > 0, got {self.swiglu_limit!r}")
            object.__setattr__(self, "swiglu_limit", float(self.swiglu_limit))
        if not isinstance(self.lora_enabled, bool):
            raise InvalidConfigError("MoEConfig.lora_enabled must be a bool")
        if not isinstance(self.moe_backend, str) or not self.moe_backend.strip():
            raise InvalidConfigError(f"MoEConfig.moe_backend must be 'auto' or a backend name, got {self.moe_backend!r}")
        object.__setattr__(self, "moe_backend", self.moe_backend.strip().lower())
        if not isinstance(self.parallel, ParallelConfig):
            raise InvalidConfigError(f"MoEConfig.parallel must be a ParallelConfig, got {self.parallel!r}")
        if self.num_experts % self.parallel.ep_size:
            raise InvalidConfigError(
                f"MoEConfig.num_experts={self.num_experts} is not divisible by ep_size={self.parallel.ep_size}"
            )
        # Configs key the selection cache: hash once, not on every lookup.
        object.__setattr__(self, "_hash", hash(tuple(getattr(self, f.name) for f in fields(self))))

    def __hash__(self) -> int:
        return self._hash

    @property
    def activation_format(self) -> ActivationFormat:
        return self.parallel.activation_format

    @property
    def local_num_experts(self) -> int:
        """Experts held by one expert-parallel rank."""
        return self.num_experts // self.parallel.ep_size

    @property
    def dtype_name(self) -> str:
        return _DTYPES[self.dtype]
