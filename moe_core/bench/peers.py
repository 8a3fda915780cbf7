"""Peers timed beside the registered backends: a `torch._grouped_mm` pipeline for the whole layer."""

from __future__ import annotations

import torch

from moe_core.config import Activation, ActivationFormat, MoEConfig
from moe_core.reference.compute import gated_activation
from moe_core.routing import Routing
from moe_core.weights import ExpertWeights

GROUPED_MM = "torch_grouped_mm"


def grouped_mm_available(cfg: MoEConfig, weights: ExpertWeights, device: torch.device) -> str | None:
    """None if the peer can run this problem, else why not."""
    if not hasattr(torch, "_grouped_mm"):
        return "this torch has no torch._grouped_mm"
    if cfg.activation_format is not ActivationFormat.STANDARD:
        return "the grouped_mm peer runs the standard activation format only"
    if weights.weight_key is not None:
        return "the grouped_mm peer runs unquantized (16-bit) weights only"
    if cfg.dtype is not torch.bfloat16:
        return "torch._grouped_mm runs bfloat16"
    if device.type == "cuda" and torch.cuda.get_device_capability(device) < (9, 0):
        return "torch._grouped_mm needs sm_90+ on CUDA"
    return None


class GroupedMMPipeline:
    """Full layer: sort pairs by expert, grouped GEMM, gated activation, grouped GEMM, weighted un-permute.

    Routing is included in the timed work, as for every backend.
    """

    name = GROUPED_MM
    cuda_graph_safe = True

    def __init__(self, cfg: MoEConfig, weights: ExpertWeights):
        self.cfg = cfg
        self.w13_t = weights.w13.transpose(1, 2)  # [E, H, 2I] views, column-major operands
        self.w2_t = weights.w2.transpose(1, 2)  # [E, I, H]

    def __call__(self, x: torch.Tensor, routing: Routing) -> torch.Tensor:
        cfg = self.cfg
        ids = routing.topk_ids.reshape(-1)
        order = torch.argsort(ids, stable=True)
        counts = torch.zeros(cfg.num_experts, dtype=torch.int32, device=x.device).scatter_add_(0, ids.long(), torch.ones_like(ids, dtype=torch.int32))
        offsets = torch.cumsum(counts, 0, dtype=torch.int32)  # (bincount would synchronise with the host)
        tokens = order // cfg.top_k
        h = torch._grouped_mm(x[tokens], self.w13_t, offs=offsets)
        if cfg.activation is Activation.SILU and cfg.swiglu_limit is None:
            act = torch.nn.functional.silu(h[:, : cfg.intermediate_size]) * h[:, cfg.intermediate_size :]
        else:
            act = gated_activation(h, cfg.activation, cfg.swiglu_limit).to(h.dtype)
        y = torch._grouped_mm(act, self.w2_t, offs=offsets)
        y = y * routing.topk_weights.reshape(-1)[order].unsqueeze(1).to(y.dtype)
        out = torch.zeros(x.shape[0], cfg.hidden_size, dtype=torch.float32, device=x.device)
        out.index_add_(0, tokens, y.float())
        return out.to(x.dtype)
