"""Random-weight transformers MoE models built in code (no network, no hub download).

For examples, tests and benchmarks: :func:`config` gives a small config of each architecture
(override any field, e.g. the MoE shape of a real model), :func:`random_model` builds the model with
expert weights re-drawn so that each expert's output has unit scale (transformers' own init makes
experts ~1e-3 of the residual stream, which would hide any error in them).
"""

from __future__ import annotations

import copy

import torch
import transformers
from torch import nn

from moe_core.errors import InvalidConfigError

_SMALL = dict(vocab_size=128, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)

_CONFIGS = {
    "mixtral": ("MixtralConfig", dict(_SMALL, intermediate_size=32, num_local_experts=4, num_experts_per_tok=2)),
    "qwen3_moe": ("Qwen3MoeConfig", dict(_SMALL, head_dim=16, intermediate_size=96, moe_intermediate_size=32, num_experts=8, num_experts_per_tok=2)),
    "olmoe": ("OlmoeConfig", dict(_SMALL, intermediate_size=32, num_experts=8, num_experts_per_tok=2)),
    "deepseek_v3": ("DeepseekV3Config", dict(
        _SMALL, num_key_value_heads=4, intermediate_size=96, moe_intermediate_size=32, n_routed_experts=8, num_experts_per_tok=2,
        n_group=2, topk_group=1, n_shared_experts=1, first_k_dense_replace=0, q_lora_rank=32, kv_lora_rank=16,
        qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16,
    )),
    "gpt_oss": ("GptOssConfig", dict(_SMALL, head_dim=16, intermediate_size=32, num_local_experts=4, num_experts_per_tok=2)),
}

#: Architectures :func:`config` builds (model_type names).
ARCHITECTURES = tuple(_CONFIGS)


def config(arch: str, **overrides) -> transformers.PretrainedConfig:
    """A small config of ``arch``; ``overrides`` replace or add constructor arguments."""
    if arch not in _CONFIGS:
        raise InvalidConfigError(f"unknown architecture {arch!r}; valid: {', '.join(ARCHITECTURES)}")
    class_name, defaults = _CONFIGS[arch]
    return getattr(transformers, class_name)(**{**defaults, **overrides})


def experts_modules(model: nn.Module) -> list[nn.Module]:
    """The model's experts modules (those transformers' ``@use_experts_implementation`` decorates)."""
    return [m for m in model.modules() if hasattr(m, "gate_up_proj") and hasattr(m, "has_gate")]


def random_model(arch: str, *, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu", seed: int = 0, **overrides) -> nn.Module:
    """An eval-mode causal LM of ``arch`` with random weights and unit-scale experts (see module doc)."""
    torch.manual_seed(seed)
    with torch.device(device):
        model = transformers.AutoModelForCausalLM.from_config(config(arch, **overrides), dtype=dtype).eval()
    with torch.no_grad():
        for experts in experts_modules(model):
            for p in (experts.gate_up_proj, experts.down_proj):
                fan_in = p.shape[-2] if getattr(experts, "is_transposed", False) else p.shape[-1]
                p.normal_(0.0, fan_in**-0.5)
    return model


def fine_grained_fp8(model: nn.Module, scale_fmt: str = "float") -> nn.Module:
    """Turn ``model``'s experts into transformers' fine-grained fp8 experts (128x128 blocks, dynamic
    activations), quantized by transformers' own ``Fp8Quantize``; in place.

    Returns the oracle: a copy of the model taken before, whose experts hold the weights dequantized
    back by transformers' ``Fp8Dequantize`` (what the fp8 experts compute, without activation
    quantization). ``scale_fmt``: ``"float"`` (float32 scales) or ``"ue8m0"`` (powers of two).
    """
    from transformers.integrations.finegrained_fp8 import ALL_FP8_EXPERTS_FUNCTIONS, FP8Experts, Fp8Dequantize, Fp8Quantize
    from transformers.integrations.moe import use_experts_implementation
    from transformers.utils.quantization_config import FineGrainedFP8Config

    oracle = copy.deepcopy(model)
    quantizer = type("Fp8Quantizer", (), {"quantization_config": FineGrainedFP8Config(scale_fmt=scale_fmt)})()
    fp8_class = use_experts_implementation(experts_class=FP8Experts, experts_interface=ALL_FP8_EXPERTS_FUNCTIONS)
    names = [name for name, module in model.named_modules() if module in experts_modules(model)]
    for name, plain in zip(names, experts_modules(oracle)):
        experts = model.get_submodule(name)
        with torch.device(experts.gate_up_proj.device):
            fp8 = fp8_class(experts.config, block_size=(128, 128), scale_fmt=scale_fmt)
        for proj in ("gate_up_proj", "down_proj"):
            packed = Fp8Quantize(quantizer).convert({proj: getattr(experts, proj).detach()})
            for key, value in packed.items():
                setattr(fp8, key, nn.Parameter(value, requires_grad=False))
            restored = Fp8Dequantize(quantizer).convert({proj: [packed[proj]], f"{proj}_scale_inv": [packed[f"{proj}_scale_inv"]]})
            with torch.no_grad():
                getattr(plain, proj).copy_(restored[proj][0])
        model.set_submodule(name, fp8)
    return oracle
