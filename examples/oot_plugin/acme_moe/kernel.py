"""ACME's kernel: dequantizes weights once at preparation, then runs each expert's GEMMs in the model dtype."""

from dataclasses import replace

import torch

from moe_core import MoEKernel
from moe_core.quantization.qtensor import dequantize, fake_quantize
from moe_core.reference.compute import gated_activation


class AcmeKernel(MoEKernel):
    backend_name = "acme"

    def prepare_weights(self, weights):
        weights = super().prepare_weights(weights)
        if weights.weight_key is None:
            return weights
        w13, w2 = (dequantize(q).to(self.config.dtype) for q in weights.qtensors())
        return replace(weights, w13=w13, w2=w2, weight_key=None, w13_scale=None, w2_scale=None)

    def forward(self, x, weights, routing, *, expert_map, apply_router_weight_on_input):
        ids = routing.topk_ids.long() if expert_map is None else expert_map.long()[routing.topk_ids.long()]
        w = routing.topk_weights.float()
        if apply_router_weight_on_input:  # top_k == 1 (checked by the base class)
            x, w = (x.float() * w).to(x.dtype), torch.ones_like(w)
        xq = fake_quantize(x, self.activation_key).to(x.dtype)
        out = torch.zeros(x.shape[0], x.shape[1], dtype=torch.float32, device=x.device)
        for e in ids[ids >= 0].unique().tolist():
            token, slot = (ids == e).nonzero(as_tuple=True)
            h = gated_activation(xq[token] @ weights.w13[e].T, self.config.activation, self.config.swiglu_limit)
            h = fake_quantize(h, self.activation_key).to(x.dtype)
            y = (h @ weights.w2[e].T).float() * w[token, slot, None]
            out.index_add_(0, token, y)
        return out.to(x.dtype)
