"""What a transformers experts module holds, in moe-core's terms — or why moe-core cannot run it.

transformers' ``@use_experts_implementation`` decorates each model's experts class and records its
layout on every instance: ``has_gate``, ``has_bias``, ``is_transposed``, ``is_concatenated`` and
(newer versions) ``has_post_expert_norm`` and ``_is_expert_parallel``. The weights are
``gate_up_proj`` [E, 2I, H] (gate rows first, as moe-core's ``w13``) and ``down_proj`` [E, H, I]
(as ``w2``), or [E, H, 2I] and [E, I, H] when transposed. transformers' fine-grained fp8 experts
(``FP8Experts``) add ``gate_up_proj_scale_inv`` / ``down_proj_scale_inv``: per-128x128-block
multipliers, exactly moe-core's block-128 weight scales.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from transformers.activations import GELUActivation, SiLUActivation
from transformers.integrations.finegrained_fp8 import FP8Experts
from transformers.integrations.moe import _default_apply_gate

from moe_core.config import Activation, MoEConfig
from moe_core.errors import MoECoreError
from moe_core.quant import BLOCK_128, QuantKey, kFp8Dynamic128Sym, kFp8Static128BlockSym
from moe_core.quantization.qtensor import scale_shape
from moe_core.weights import ExpertWeights

_ACTIVATIONS = {nn.SiLU: Activation.SILU, SiLUActivation: Activation.SILU, GELUActivation: Activation.GELU}
_FLOAT_WEIGHTS = (torch.float32, torch.float16, torch.bfloat16)


class UnsupportedExpertsError(MoECoreError, NotImplementedError):
    """moe-core cannot run this transformers experts module; the message lists every reason."""

    def __init__(self, module: nn.Module, reasons: list[str]):
        self.module_class = type(module).__name__
        self.reasons = tuple(reasons)
        super().__init__(
            f"experts_implementation='moe_core' cannot run {self.module_class}: " + "; ".join(reasons)
            + ". Use another experts implementation for this model (e.g. experts_implementation='grouped_mm')."
        )


@dataclass(frozen=True)
class ExpertsLayout:
    """The moe-core view of one experts module: sizes, activation, quantization and weight layout."""

    num_experts: int
    hidden_size: int
    intermediate_size: int
    activation: Activation
    swiglu_limit: float | None
    transposed: bool
    weight_key: QuantKey | None
    activation_key: QuantKey | None

    def config(self, top_k: int, dtype: torch.dtype, moe_backend: str) -> MoEConfig:
        """The MoEConfig of a call with ``top_k`` experts per token and activations of ``dtype``."""
        return MoEConfig(
            num_experts=self.num_experts, top_k=top_k, hidden_size=self.hidden_size,
            intermediate_size=self.intermediate_size, dtype=dtype, activation=self.activation,
            swiglu_limit=self.swiglu_limit, moe_backend=moe_backend,
        )

    def sources(self, module: nn.Module) -> tuple[torch.Tensor, ...]:
        """The module tensors the prepared weights are made of (their identity keys the cache)."""
        names = ("gate_up_proj", "down_proj")
        if self.weight_key is not None:
            names += ("gate_up_proj_scale_inv", "down_proj_scale_inv")
        return tuple(getattr(module, n) for n in names)

    def weights(self, module: nn.Module, dtype: torch.dtype) -> ExpertWeights:
        """moe-core expert weights built from the module (transposed layouts are copied once).

        Unquantized weights are cast to the activation ``dtype`` when they differ (autocast).
        """
        w13, w2 = (t.detach() for t in self.sources(module)[:2])
        if self.transposed:
            w13, w2 = w13.transpose(1, 2).contiguous(), w2.transpose(1, 2).contiguous()
        if self.weight_key is None:
            return ExpertWeights(w13.to(dtype), w2.to(dtype))
        s13, s2 = (t.detach().float() for t in self.sources(module)[2:])  # ue8m0 scales are powers of two: exact
        return ExpertWeights(w13, w2, self.weight_key, w13_scale=s13, w2_scale=s2)


def describe(module: nn.Module) -> ExpertsLayout:
    """The layout of a transformers experts module; :class:`UnsupportedExpertsError` lists what moe-core lacks."""
    reasons = []
    if not getattr(module, "has_gate", True):
        reasons.append("non-gated experts (has_gate=False, up_proj only): moe-core runs gated act(gate) * up experts")
    if getattr(module, "has_bias", False):
        reasons.append("projection biases (has_bias=True): moe-core's kernels have no bias terms")
    if not getattr(module, "is_concatenated", True):
        reasons.append("interleaved gate/up columns (is_concatenated=False): moe-core takes [gate; up] halves")
    if getattr(module, "has_post_expert_norm", False):
        reasons.append("a norm after each expert (has_post_expert_norm=True)")
    if getattr(module, "_is_expert_parallel", False):
        reasons.append("transformers' expert parallelism (sentinel expert ids): moe-core's kernels take local ids only")
    activation = _activation(module, reasons)
    weight_key, activation_key, swiglu_limit = _quantization(module, reasons)
    w13, w2 = getattr(module, "gate_up_proj", None), getattr(module, "down_proj", None)
    if not (isinstance(w13, torch.Tensor) and isinstance(w2, torch.Tensor) and w13.dim() == w2.dim() == 3):
        reasons.append("no 3-D gate_up_proj and down_proj weights")
        raise UnsupportedExpertsError(module, reasons)
    transposed = bool(getattr(module, "is_transposed", False))
    if transposed:
        e, h, i2 = w13.shape
        want_w2 = (e, i2 // 2, h)
    else:
        e, i2, h = w13.shape
        want_w2 = (e, h, i2 // 2)
    if i2 % 2 or tuple(w2.shape) != want_w2:
        reasons.append(f"weight shapes gate_up_proj {tuple(w13.shape)} and down_proj {tuple(w2.shape)} do not form [E, 2I, H] and [E, H, I]")
    if weight_key is not None:
        _check_fp8_scales(module, (e, i2, h), (e, h, i2 // 2), reasons)
    if reasons:
        raise UnsupportedExpertsError(module, reasons)
    return ExpertsLayout(e, h, i2 // 2, activation, swiglu_limit, transposed, weight_key, activation_key)


def _activation(module: nn.Module, reasons: list[str]) -> Activation | None:
    """The gated activation act(gate) * up of the module, or None (with the reason) for any other gating."""
    if isinstance(module, FP8Experts):  # its _apply_gate is act(gate) * up, clamped by `limit`, unless these are set
        if getattr(module, "gate_softcap", None) is not None or getattr(module, "swiglu_alpha", None) is not None:
            reasons.append("softcapped or alpha-scaled SwiGLU gating: moe-core computes act(gate) * up")
            return None
    elif getattr(type(module), "_apply_gate", _default_apply_gate) is not _default_apply_gate:
        reasons.append(f"custom gating {type(module).__name__}._apply_gate: moe-core computes act(gate) * up")
        return None
    activation = _ACTIVATIONS.get(type(getattr(module, "act_fn", None)))
    if activation is None:
        reasons.append(f"activation {type(getattr(module, 'act_fn', None)).__name__}: moe-core runs silu and (exact) gelu")
    return activation


def _quantization(module: nn.Module, reasons: list[str]) -> tuple[QuantKey | None, QuantKey | None, float | None]:
    """(weight key, activation key, SwiGLU clamp) of the module; appends what moe-core cannot map."""
    if not isinstance(module, FP8Experts):
        dtype = getattr(getattr(module, "gate_up_proj", None), "dtype", None)
        if dtype not in _FLOAT_WEIGHTS:
            reasons.append(f"{dtype} weights: moe-core maps float32/float16/bfloat16 and transformers' fine-grained fp8 experts")
        return None, None, None
    if getattr(module, "gate_up_proj", None) is None or module.gate_up_proj.dtype != torch.float8_e4m3fn:
        reasons.append("fp4 (or non-e4m3) expert weights: moe-core maps fine-grained fp8 e4m3 weights with 128x128 blocks")
    if tuple(module.block_size or ()) != (BLOCK_128.rows, BLOCK_128.cols):
        reasons.append(f"fp8 weight blocks {module.block_size}: moe-core's fp8-block scheme takes 128x128 blocks")
    if module.activation_scheme != "dynamic":
        reasons.append(f"activation_scheme={module.activation_scheme!r} (per-expert static scales): moe-core's fp8-block scheme quantizes activations dynamically")
    return kFp8Static128BlockSym, kFp8Dynamic128Sym, module.limit


def _check_fp8_scales(module: nn.Module, w13_shape: tuple, w2_shape: tuple, reasons: list[str]) -> None:
    for name, logical in (("gate_up_proj_scale_inv", w13_shape), ("down_proj_scale_inv", w2_shape)):
        scale, want = getattr(module, name, None), scale_shape(BLOCK_128, logical)
        if scale is None or tuple(scale.shape) != want:
            reasons.append(f"{name} of shape {None if scale is None else tuple(scale.shape)}, expected {want} for 128x128 blocks")
