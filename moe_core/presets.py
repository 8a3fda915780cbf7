"""Model presets: MoE layer shapes of well-known models, and random layers for demos and tests."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import torch

from moe_core.config import MoEConfig
from moe_core.errors import InvalidConfigError
from moe_core.quant import QuantScheme, QuantDtype
from moe_core.quantization.qtensor import quantize
from moe_core.routing import Routing
from moe_core.weights import ExpertWeights, quantize_experts


@dataclass(frozen=True)
class ModelPreset:
    """The MoE layer of one model: experts, top-k, hidden and intermediate sizes."""

    name: str
    num_experts: int
    top_k: int
    hidden_size: int
    intermediate_size: int

    def config(self, **overrides) -> MoEConfig:
        fields = dict(num_experts=self.num_experts, top_k=self.top_k, hidden_size=self.hidden_size, intermediate_size=self.intermediate_size)
        fields.update(overrides)
        return MoEConfig(**fields)


MODELS: dict[str, ModelPreset] = {
    p.name: p
    for p in (
        ModelPreset("qwen3-30b-a3b", 128, 8, 2048, 768),
        ModelPreset("mixtral-8x7b", 8, 2, 4096, 14336),
        ModelPreset("deepseek-v3", 256, 8, 7168, 2048),
        ModelPreset("gpt-oss-20b", 32, 4, 2880, 2880),
        ModelPreset("tiny", 8, 2, 128, 256),
    )
}


def model(name: str) -> ModelPreset:
    try:
        return MODELS[name]
    except KeyError:
        raise InvalidConfigError(f"unknown model preset {name!r}; valid presets: {', '.join(MODELS)}") from None


def random_layer(config: MoEConfig, scheme: QuantScheme, *, device: str | torch.device = "cpu", seed: int = 0, calibration_tokens: int = 64) -> ExpertWeights:
    """Random expert weights for ``config`` quantized into ``scheme`` (static activation scales calibrated).

    Weights are drawn on ``device`` one expert at a time (so a DeepSeek-V3-sized layer never needs
    its float32 copy in memory) and scaled so that layer outputs have roughly unit scale. Static
    activation scales (per-tensor fp8) are the amax of a random unit-variance calibration batch,
    with 2x headroom.
    """
    device = torch.device(device)
    gen = torch.Generator(device=device).manual_seed(seed)
    e, h, i = config.local_num_experts, config.hidden_size, config.intermediate_size
    parts = []
    for _ in range(e):
        w13 = torch.randn(1, 2 * i, h, generator=gen, device=device) / h**0.5
        w2 = torch.randn(1, h, i, generator=gen, device=device) / i**0.5
        if scheme.weight_key is None:
            parts.append(ExpertWeights(w13.to(config.dtype), w2.to(config.dtype)))
        else:
            parts.append(quantize_experts(w13, w2, scheme.weight_key))
    weights = _stack(parts)
    akey = scheme.activation_key
    if akey is not None and akey.static:
        if akey.dtype is not QuantDtype.FP8_E4M3:
            raise InvalidConfigError(f"static activation calibration is implemented for fp8 only, not {akey}")
        sample = torch.randn(calibration_tokens, h, generator=gen, device=device)
        a13 = quantize(sample, akey).scale * 2
        a2 = torch.full((1, 1), 2.0 * 4.0 / 448.0, device=device)  # gated activations of unit-scale inputs stay well under 4
        weights = replace(weights, a13_scale=a13, a2_scale=a2)
    return weights


def random_inputs(config: MoEConfig, tokens: int, *, device: str | torch.device = "cpu", seed: int = 0) -> tuple[torch.Tensor, Routing]:
    """Random unit-variance hidden states (never zeros) and softmax top-k routing from random logits."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(tokens, config.hidden_size, generator=gen).to(device=device, dtype=config.dtype)
    logits = torch.randn(tokens, config.num_experts, generator=gen).to(device)
    return x, Routing.from_logits(logits, config.top_k)


def _stack(parts: list[ExpertWeights]) -> ExpertWeights:
    """Concatenate single-expert containers along the expert dimension."""
    first = parts[0]
    tensors = {f.name: torch.cat([getattr(p, f.name) for p in parts]) for f in fields(first) if isinstance(getattr(first, f.name), torch.Tensor)}
    return replace(first, **tensors)
