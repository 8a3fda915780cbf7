"""Random-weight transformers MoE models built in code (no network, no hub download).

For examples, tests and benchmarks: :func:`config` gives a small config of each architecture
(override any field, e.g. the MoE shape of a real model), :func:`random_model` builds the model with
expert weights re-drawn so that each expert's output has unit scale (transformers' own init makes
experts ~1e-3 of the residual stream, which would hide any error in them).
"""

from __future__ import annotations

import torch
import transformers
from torch import nn

from moe_core.errors import InvalidConfigError

_SMALL = dict(vocab_size=128, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)

_CONFIGS = {
    "mixtral": lambda: transformers.MixtralConfig(**_SMALL, intermediate_size=32, num_local_experts=4, num_experts_per_tok=2),
    "qwen3_moe": lambda: transformers.Qwen3MoeConfig(**_SMALL, head_dim=16, intermediate_size=96, moe_intermediate_size=32, num_experts=8, num_experts_per_tok=2),
    "olmoe": lambda: transformers.OlmoeConfig(**_SMALL, intermediate_size=32, num_experts=8, num_experts_per_tok=2),
    "deepseek_v3": lambda: transformers.DeepseekV3Config(
        **{**_SMALL, "num_key_value_heads": 4}, intermediate_size=96, moe_intermediate_size=32, n_routed_experts=8, num_experts_per_tok=2,
        n_group=2, topk_group=1, n_shared_experts=1, first_k_dense_replace=0, q_lora_rank=32, kv_lora_rank=16,
        qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16,
    ),
    "gpt_oss": lambda: transformers.GptOssConfig(**_SMALL, head_dim=16, intermediate_size=32, num_local_experts=4, num_experts_per_tok=2),
}

#: Architectures :func:`config` builds (model_type names).
ARCHITECTURES = tuple(_CONFIGS)


def config(arch: str, **overrides) -> transformers.PretrainedConfig:
    """A small config of ``arch`` with ``overrides`` applied (any config attribute)."""
    if arch not in _CONFIGS:
        raise InvalidConfigError(f"unknown architecture {arch!r}; valid: {', '.join(ARCHITECTURES)}")
    cfg = _CONFIGS[arch]()
    for key, value in overrides.items():
        setattr(cfg, key, value)
    return cfg


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
