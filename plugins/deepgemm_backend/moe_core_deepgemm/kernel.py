"""The kernels behind ``deepgemm`` (standard format) and ``batched_deepgemm`` (batched-experts format).

STANDARD: quantize the T input rows once (the Triton plugin's 1x128 kernel) -> route and permute
into DeepGEMM's expert-contiguous layout (:mod:`moe_core_deepgemm.glue`) ->
``m_grouped_fp8_gemm_nt_contiguous`` (gate and up in one GEMM) -> fused clamp + activation +
quantization -> ``m_grouped_fp8_gemm_nt_contiguous`` -> weighted un-permute. Unquantized bf16 layers
use ``m_grouped_bf16_gemm_nt_contiguous`` and skip both quantizations.

BATCHED_EXPERTS: the same with ``m_grouped_*_gemm_nt_masked`` on ``[E, max_tokens, H]`` (padded to a
multiple of 128 rows per expert when it is not one), which reads the per-expert counts on the device;
rows past each count are zeroed in the output.

Neither path synchronises with the host: the contiguous layout has a static row bound
(:func:`~moe_core_deepgemm.layout.contiguous_capacity`) and padding rows carry M index -1, which
DeepGEMM skips. DeepGEMM itself is imported on first use (:func:`deep_gemm_module`).
"""

from __future__ import annotations

import importlib
from dataclasses import replace

import torch

from moe_core.errors import MoECoreError
from moe_core.kernel import MoEKernel
from moe_core.routing import BatchedRouting
from moe_core.weights import ExpertWeights
from moe_core_deepgemm import glue, how_to_build
from moe_core_deepgemm.layout import MASKED_M_MULTIPLE, empty_mn_major_scales, round_up, weight_scales_for_sm90
from moe_core_triton.quantize import quantize_activations


class DeepGemmUnavailableError(MoECoreError, ImportError):
    """The deep_gemm package does not import in this process."""


def deep_gemm_module():
    """The imported ``deep_gemm`` package, or :class:`DeepGemmUnavailableError` saying how to install it."""
    try:
        return importlib.import_module("deep_gemm")
    except ImportError as exc:
        raise DeepGemmUnavailableError(f"the deepgemm backends need the deep_gemm package, which failed to import ({exc}): {how_to_build()}") from exc


class DeepGemmKernel(MoEKernel):
    """DeepGEMM grouped GEMMs with moe-core's Triton glue, STANDARD activation format."""

    backend_name = "deepgemm"
    cuda_graph_safe = True  # static shapes, device-side routing: no host synchronisation
    guards_routing = True  # glue._route_kernel drops and counts invalid ids and map entries

    def prepare_weights(self, weights: ExpertWeights) -> ExpertWeights:
        """Validate, put w13 in gate/up order, make weights contiguous and block scales DeepGEMM's (once)."""
        weights = super().prepare_weights(weights)
        fix = {"w13": weights.w13.contiguous(), "w2": weights.w2.contiguous()}
        if self.weight_key is not None:
            fix["w13_scale"] = weight_scales_for_sm90(weights.w13_scale)
            fix["w2_scale"] = weight_scales_for_sm90(weights.w2_scale)
        return replace(weights, **fix)

    # ------------------------------------------------------------------ forward
    def forward(self, hidden_states, weights, routing, *, expert_map, apply_router_weight_on_input):
        if isinstance(routing, BatchedRouting):
            return self._forward_batched(hidden_states, weights, routing)
        cfg = self.config
        dg = deep_gemm_module()
        x = hidden_states
        if x.shape[0] == 0:
            return torch.empty_like(x)
        if apply_router_weight_on_input:  # top_k == 1
            x = (x.float() * routing.topk_weights.float()).to(x.dtype)
        quantized = self.weight_key is not None
        xq, xs = quantize_activations(x, self.activation_key) if quantized else (x, None)
        layout = glue.build_layout(
            routing.topk_ids, cfg.num_experts, cfg.local_num_experts, dg.get_mk_alignment_for_contiguous_layout(),
            expert_map, self.routing_errors,
        )
        a, a_scales, pair_row = glue.permute(xq, xs, layout)
        h = torch.empty((layout.capacity, 2 * cfg.intermediate_size), dtype=cfg.dtype, device=x.device)
        self._contiguous_gemm(dg, a, a_scales, weights.w13, weights.w13_scale, h, layout.m_indices)
        inter, inter_scales = glue.gated_activation(h, cfg.activation, cfg.swiglu_limit, quantized, m_indices=layout.m_indices)
        y = torch.empty((layout.capacity, cfg.hidden_size), dtype=cfg.dtype, device=x.device)
        self._contiguous_gemm(dg, inter, inter_scales, weights.w2, weights.w2_scale, y, layout.m_indices)
        weights_out = None if apply_router_weight_on_input else routing.topk_weights
        return glue.unpermute(y, pair_row, weights_out, cfg.top_k, cfg.dtype)

    def _forward_batched(self, x, weights, routing):
        cfg = self.config
        dg = deep_gemm_module()
        experts, max_tokens, hidden = x.shape
        if max_tokens == 0:
            return torch.zeros_like(x)
        rows = round_up(max_tokens, MASKED_M_MULTIPLE)  # padded per-expert rows (see MASKED_M_MULTIPLE)
        counts = routing.expert_num_tokens.to(device=x.device, dtype=torch.int32).contiguous()  # clamped by apply()
        quantized = self.weight_key is not None
        a = x.new_empty((experts, rows, hidden), dtype=torch.float8_e4m3fn if quantized else x.dtype)
        a_scales = None
        if quantized:
            q, s = quantize_activations(x.reshape(experts * max_tokens, hidden), self.activation_key)
            a[:, :max_tokens] = q.view(experts, max_tokens, hidden)
            a_scales = empty_mn_major_scales(rows, s.shape[1], x.device, batch=experts)
            a_scales[:, :max_tokens] = s.view(experts, max_tokens, -1)
        else:
            a[:, :max_tokens] = x
        h = torch.empty((experts, rows, 2 * cfg.intermediate_size), dtype=cfg.dtype, device=x.device)
        self._masked_gemm(dg, a, a_scales, weights.w13, weights.w13_scale, h, counts, max_tokens)
        inter, inter_scales = glue.gated_activation(h, cfg.activation, cfg.swiglu_limit, quantized, counts=counts)
        y = torch.empty((experts, rows, hidden), dtype=cfg.dtype, device=x.device)
        self._masked_gemm(dg, inter, inter_scales, weights.w2, weights.w2_scale, y, counts, max_tokens)
        past_count = torch.arange(rows, device=x.device).unsqueeze(0) >= counts.unsqueeze(1)
        y.masked_fill_(past_count.unsqueeze(2), 0)
        return y if rows == max_tokens else y[:, :max_tokens].contiguous()

    # ------------------------------------------------------------------ DeepGEMM calls
    @staticmethod
    def _contiguous_gemm(dg, a, a_scales, w, w_scales, out, m_indices) -> None:
        if a_scales is None:
            dg.m_grouped_bf16_gemm_nt_contiguous(a, w, out, m_indices)
        else:
            dg.m_grouped_fp8_gemm_nt_contiguous((a, a_scales), (w, w_scales), out, m_indices)

    @staticmethod
    def _masked_gemm(dg, a, a_scales, w, w_scales, out, counts, expected_m: int) -> None:
        if a_scales is None:
            dg.m_grouped_bf16_gemm_nt_masked(a, w, out, counts, expected_m)
        else:
            dg.m_grouped_fp8_gemm_nt_masked((a, a_scales), (w, w_scales), out, counts, expected_m)


class BatchedDeepGemmKernel(DeepGemmKernel):
    """The masked grouped GEMMs for the BATCHED_EXPERTS activation format."""

    backend_name = "batched_deepgemm"
    guards_routing = False  # counts above max_tokens are clamped (and counted) by MoEKernel.apply
