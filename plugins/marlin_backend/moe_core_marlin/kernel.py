"""``MarlinKernel``: moe-core's fused-MoE contract on vLLM's compiled Marlin MoE GEMM.

prepare_weights is this plugin's own torch code (:mod:`moe_core_marlin.repack`,
:mod:`moe_core_marlin.fp4_scales`; any device, no library needed): codes into Marlin's tile layout,
scales permuted, zero points packed, fp8 scales with Marlin's exponent bias folded in, fp4 scales in
Marlin's nvfp4 / mxfp4 formats. moe-core's w13 = [gate; up] as [E, 2I, H] is Marlin's w1
(N = 2I, K = H), gate first; w2 [E, H, I] is its w2. forward loads the library on first use
(:mod:`moe_core_marlin.library`) and runs :func:`moe_core_marlin.glue.fused_moe`.
"""

from __future__ import annotations

import functools
from dataclasses import replace

import torch

from moe_core.errors import KernelInputError
from moe_core.kernel import MoEKernel
from moe_core.quant import QuantDtype, scheme_for_keys
from moe_core.weights import ExpertWeights
from moe_core_marlin import contract, glue, library
from moe_core_marlin.fp4_scales import mxfp4_scale_exponents, nvfp4_global_scale, nvfp4_scale_bytes, nvfp4_scale_factor
from moe_core_marlin.layout import by_group, fp4_scales_by_group, fp8_codes, fp8_scales_by_group, unsigned_codes
from moe_core_marlin.repack import pack_zero_points, permute_scales, repack_weights


class MarlinKernel(MoEKernel):
    """vLLM's Marlin MoE GEMM, STANDARD activation format, int4/int8/fp8/fp4 weight-only, CUDA sm80+."""

    backend_name = "marlin"
    cuda_graph_safe = True  # the glue never reads device values on the host
    guards_routing = True  # moe_core_marlin.routing_guard drops invalid pairs before the align and counts them

    def __init__(self, config, weight_key, activation_key):
        super().__init__(config, weight_key, activation_key)
        self._scratch: dict[torch.device, glue.DeviceScratch] = {}

    @property
    def bits(self) -> int:
        return 4 if self.weight_key.dtype in (QuantDtype.INT4, QuantDtype.FP4_E2M1) else 8

    @property
    def is_fp8(self) -> bool:
        return self.weight_key.dtype is QuantDtype.FP8_E4M3

    @property
    def is_fp4(self) -> bool:
        return self.weight_key.dtype is QuantDtype.FP4_E2M1

    @property
    def group_size(self) -> int:
        return self.weight_key.group.cols

    @property
    def scalar_type(self) -> contract.ScalarType:
        """vLLM's ScalarType of this scheme's codes."""
        return contract.SCALAR_TYPES[contract.SCALAR_TYPE_BY_SCHEME[scheme_for_keys(self.weight_key, self.activation_key).name]]

    def prepare_weights(self, weights: ExpertWeights) -> ExpertWeights:
        """Validate, put w13 in gate/up order, and lay weights, scales and zero points out as Marlin reads them (once)."""
        weights = super().prepare_weights(weights)
        fix = {}
        for name in ("w13", "w2"):
            data = getattr(weights, name)
            codes = fp8_codes(data) if self.is_fp8 else unsigned_codes(data, self.bits)
            size_n, size_k = codes.shape[1], codes.shape[2]
            fix[name] = repack_weights(codes, self.bits)
            scale = getattr(weights, f"{name}_scale")
            if self.is_fp4:
                fix.update(self._fp4_scales(name, weights, size_k))
            elif self.is_fp8:
                block_n = max(self.weight_key.group.rows, 1)
                scales = permute_scales(fp8_scales_by_group(scale, size_n, block_n, self.config.dtype), size_k, self.group_size)
                fix[f"{name}_scale"] = self._with_exponent_bias(name, scales)
            else:
                fix[f"{name}_scale"] = permute_scales(by_group(scale, self.config.dtype), size_k, self.group_size)
            zero = getattr(weights, f"{name}_zero")
            if zero is not None:
                fix[f"{name}_zero"] = pack_zero_points(by_group(zero, torch.int32), self.bits)
        return replace(weights, **fix)

    def _fp4_scales(self, name: str, weights: ExpertWeights, size_k: int) -> dict:
        """Marlin's nvfp4 scale bytes and global scale, or mxfp4 exponents, for projection ``name``."""
        dtype = self.config.dtype
        scale = getattr(weights, f"{name}_scale")
        permuted = permute_scales(fp4_scales_by_group(scale, dtype), size_k, self.group_size)
        if not self.weight_key.global_scale:
            return {f"{name}_scale": mxfp4_scale_exponents(permuted)}
        factor = nvfp4_scale_factor(permuted, dtype)
        scale_bytes = nvfp4_scale_bytes(permuted, factor)
        lost = (permuted != 0) & (scale_bytes.view(torch.uint8) == 0)
        if bool(lost.any()):
            raise KernelInputError(
                f"{name}_scale",
                f"{int(lost.sum())} non-zero nvfp4 block scale(s) fall below Marlin's scale format once scaled by "
                f"{factor:g} * 2**7 (it needs at least 2 there; the largest scale sets the factor in bfloat16, float16 "
                "uses 1): requantize with a smaller global scale, or use another backend",
            )
        global_scale = nvfp4_global_scale(getattr(weights, f"{name}_global_scale"), dtype, factor)
        if not bool(torch.isfinite(global_scale).all()):
            raise KernelInputError(f"{name}_global_scale", "overflows float32 once Marlin's exponent bias (2**119 in bfloat16) is folded in")
        return {f"{name}_scale": scale_bytes, f"{name}_global_scale": global_scale}

    def _with_exponent_bias(self, name: str, scales: torch.Tensor) -> torch.Tensor:
        folded = scales * contract.FP8_EXPONENT_BIAS[self.config.dtype]
        if not bool(torch.isfinite(folded).all()):
            raise KernelInputError(
                f"{name}_scale",
                f"an fp8 weight scale overflows {self.config.dtype} once Marlin's exponent bias (2**8 for float16, "
                "2**120 for bfloat16) is folded in; use bfloat16 activations or smaller scales",
            )
        return folded

    @functools.cached_property
    def problem(self) -> glue.MarlinProblem:
        """The GEMMs' scalar type and the layer's activation (fixed by the config and the keys)."""
        return glue.MarlinProblem(self.scalar_type.id, self.config.num_experts, self.config.activation, self.config.swiglu_limit)

    @functools.cached_property
    def ops(self):
        """``torch.ops._moe_C`` of the loaded library, looked up at the first forward."""
        return library.LIBRARY.ops_namespace()

    def scratch(self, device: torch.device) -> glue.DeviceScratch:
        """This kernel's Marlin locks and local map on ``device``, made at the first forward there and reused (Marlin
        zeroes its locks again itself). One made while a CUDA graph is being captured exists only in the graph, so it
        is not kept. Forwards of one kernel on two streams at once would share the locks; run them on one stream."""
        scratch = self._scratch.get(device)
        if scratch is None:
            scratch = glue.device_scratch(device, self.config.local_num_experts)
            if not (device.type == "cuda" and torch.cuda.is_current_stream_capturing()):
                self._scratch[device] = scratch
        return scratch

    def forward(self, hidden_states, weights, routing, *, expert_map, apply_router_weight_on_input):
        return glue.fused_moe(
            self.ops, hidden_states, weights, routing.topk_ids, routing.topk_weights, problem=self.problem,
            expert_map=expert_map, apply_router_weight_on_input=apply_router_weight_on_input,
            scratch=self.scratch(hidden_states.device), errors=self.routing_errors.buffer(hidden_states.device),
        )
