"""``MarlinKernel``: moe-core's fused-MoE contract on top of vLLM's ``fused_marlin_moe``.

prepare_weights packs moe-core's canonical codes GPTQ-style (:mod:`moe_core_marlin.layout`) and
repacks them with vLLM's ``gptq_marlin_moe_repack``; scales go through ``marlin_moe_permute_scales``
and zero points through ``marlin_zero_points``. moe-core's w13 = [gate; up] as [E, 2I, H] is Marlin's
w1 (N = 2I, K = H) with gate first, as vLLM's ``silu_and_mul`` reads it; w2 [E, H, I] is Marlin's w2.

fp8 weight-only follows vLLM's ``prepare_moe_fp8_layer_for_marlin``: each expert's float8_e4m3fn
[N, K] goes through ``pack_fp8_to_int32`` (then [K/4, N]) and the same repack with num_bits=8;
per-channel or 128x128 block scales become groups along K in the activation dtype, are permuted, and
get the fp8 exponent bias folded in by ``fp8_fused_exponent_bias_into_scales``.

fp4 weight-only (nvfp4-w4a16, mxfp4) follows vLLM's ``prepare_moe_fp4_layer_for_marlin``: the packed
e2m1 bytes [N, K/2] of each expert are read as int32 [N, K/8], made K-major [K/8, N] and repacked with
num_bits=4; block scales become [E, K/group, N] in the activation dtype (mxfp4 exponents through
float8_e8m0fnu), are permuted with group 16 / 32, then converted per expert by
``nvfp4_marlin_process_scales`` (float8_e4m3fn, Marlin's S0E5M3 form) or ``mxfp4_marlin_process_scales``
(float8_e8m0fnu). nvfp4's per-expert global scale goes to the activation dtype, [E], through
``nvfp4_marlin_process_global_scale``, and reaches the kernel as ``global_scale1`` / ``global_scale2``.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from moe_core.errors import KernelInputError
from moe_core.kernel import MoEKernel
from moe_core.quant import QuantDtype, scheme_for_keys
from moe_core.weights import ExpertWeights
from moe_core_marlin import contract, provider
from moe_core_marlin.layout import (
    by_group, fp4_scales_by_group, fp4_words, fp8_scales_by_group, gptq_pack, unsigned_codes,
)


class MarlinKernel(MoEKernel):
    """vLLM's Marlin fused MoE, STANDARD activation format, int4/int8/fp8/fp4 weight-only, CUDA sm80+."""

    backend_name = "marlin"

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
    def is_nvfp4(self) -> bool:
        """fp4 with e4m3 block scales and a global scale (mxfp4 has e8m0 scales and none)."""
        return self.is_fp4 and self.weight_key.global_scale

    @property
    def group_size(self) -> int:
        return self.weight_key.group.cols

    @property
    def scalar_type(self) -> str:
        """Name of the vLLM ScalarType of this scheme's codes."""
        return contract.SCALAR_TYPE_BY_SCHEME[scheme_for_keys(self.weight_key, self.activation_key).name]

    def prepare_weights(self, weights: ExpertWeights) -> ExpertWeights:
        """Validate, put w13 in gate/up order, and repack weights, scales and zero points into Marlin's layout (once)."""
        weights = super().prepare_weights(weights)
        if self.is_fp8:
            return self._prepare_fp8(weights)
        if self.is_fp4:
            return self._prepare_fp4(weights)
        fix = {}
        for name in ("w13", "w2"):
            codes = unsigned_codes(getattr(weights, name), self.bits)
            size_n, size_k = codes.shape[1], codes.shape[2]
            fix[name] = self._repack(codes, size_k, size_n)
            fix[f"{name}_scale"] = self._permute_scales(getattr(weights, f"{name}_scale"), size_k, size_n)
            zero = getattr(weights, f"{name}_zero")
            if zero is not None:
                fix[f"{name}_zero"] = self._zero_points(zero, size_n)
        return replace(weights, **fix)

    def _prepare_fp8(self, weights: ExpertWeights) -> ExpertWeights:
        pack_fp8_to_int32 = provider.function(contract.PACK_FP8_TO_INT32)
        fold_exponent_bias = provider.function(contract.FP8_FUSED_EXPONENT_BIAS_INTO_SCALES)
        repack = provider.function(contract.GPTQ_MARLIN_MOE_REPACK)
        permute = provider.function(contract.MARLIN_MOE_PERMUTE_SCALES)
        fix = {}
        for name in ("w13", "w2"):
            weight = getattr(weights, name)
            size_n, size_k = weight.shape[1], weight.shape[2]
            # Per expert [N, K] -> int32 [N, K/4] -> [K/4, N]: GPTQ packing along K, as the repack takes it.
            packed = torch.stack([pack_fp8_to_int32(fp8_tensor=w, size_k_first=False).T.contiguous() for w in weight])
            no_act_order = torch.empty((weight.shape[0], 0), dtype=torch.int32, device=weight.device)
            fix[name] = repack(b_q_weight=packed, perm=no_act_order, size_k=size_k, size_n=size_n, num_bits=8)
            block_n = max(self.weight_key.group.rows, 1)
            scales = fp8_scales_by_group(getattr(weights, f"{name}_scale"), size_n, block_n, self.config.dtype)
            scales = permute(s=scales, size_k=size_k, size_n=size_n, group_size=self.group_size)
            scales = fold_exponent_bias(scales=scales)
            if not bool(torch.isfinite(scales).all()):
                raise KernelInputError(
                    f"{name}_scale",
                    f"an fp8 weight scale overflows {self.config.dtype} once Marlin's exponent bias (2**8 for float16, "
                    "2**120 for bfloat16) is folded in; use bfloat16 activations or smaller scales",
                )
            fix[f"{name}_scale"] = scales
        return replace(weights, **fix)

    def _prepare_fp4(self, weights: ExpertWeights) -> ExpertWeights:
        repack = provider.function(contract.GPTQ_MARLIN_MOE_REPACK)
        permute = provider.function(contract.MARLIN_MOE_PERMUTE_SCALES)
        if self.is_nvfp4:
            process_scales = provider.function(contract.NVFP4_MARLIN_PROCESS_SCALES)
            process_global_scale = provider.function(contract.NVFP4_MARLIN_PROCESS_GLOBAL_SCALE)
        else:
            process_scales = provider.function(contract.MXFP4_MARLIN_PROCESS_SCALES)
        dtype = self.config.dtype
        fix = {}
        for name in ("w13", "w2"):
            data = getattr(weights, name)
            experts, size_n, size_k = data.shape[0], data.shape[1], 2 * data.shape[2]
            no_act_order = torch.empty((experts, 0), dtype=torch.int32, device=data.device)
            fix[name] = repack(b_q_weight=fp4_words(data), perm=no_act_order, size_k=size_k, size_n=size_n, num_bits=4)
            scale = getattr(weights, f"{name}_scale")
            if self.is_nvfp4:
                self._check_nvfp4_scales(f"{name}_scale", scale)
            scales = permute(s=fp4_scales_by_group(scale, dtype), size_k=size_k, size_n=size_n, group_size=self.group_size)
            if self.is_nvfp4:
                # 2-D per expert, as prepare_moe_fp4_layer_for_marlin calls it.
                fix[f"{name}_scale"] = torch.stack([process_scales(marlin_scales=s) for s in scales])
                # One per expert, [E], in the activation dtype (vLLM casts before the helper, which asserts it).
                original = getattr(weights, f"{name}_global_scale").reshape(experts)
                processed = process_global_scale(global_scale=original.to(dtype))
                if not bool((torch.isfinite(processed) & ((processed != 0) | (original == 0))).all()):
                    raise KernelInputError(
                        f"{name}_global_scale",
                        f"an nvfp4 global scale leaves the {dtype} range once cast and multiplied by Marlin's exponent "
                        "bias (2**7 for float16, 2**119 for bfloat16): global scales must stay below about 511 in either "
                        "dtype, and above 2**-24 in float16; rescale the weights (or, for tiny ones, use bfloat16)",
                    )
                fix[f"{name}_global_scale"] = processed
            else:
                # input_dtype=None: 16-bit activations (vLLM's get_marlin_input_dtype() without an override).
                fix[f"{name}_scale"] = torch.stack([process_scales(marlin_scales=s, input_dtype=None) for s in scales])
        return replace(weights, **fix)

    @staticmethod
    def _check_nvfp4_scales(name: str, scale: torch.Tensor) -> None:
        """Marlin's S0E5M3 scales need every block scale >= 0 and every non-zero one >= 2**-6 (see contract)."""
        values = scale.float()
        bad = (values < 0) | ((values > 0) & (values < contract.NVFP4_MIN_SCALE))
        if bool(bad.any()):
            raise KernelInputError(
                name,
                f"{int(bad.sum())} nvfp4 block scale(s) are negative or below 2**-6 (e4m3 subnormals); vLLM's Marlin "
                "nvfp4 scale format needs every non-zero scale * 2**7 >= 2. Requantize with a smaller global scale, "
                "or use another backend",
            )

    def _repack(self, codes: torch.Tensor, size_k: int, size_n: int) -> torch.Tensor:
        repack = provider.function(contract.GPTQ_MARLIN_MOE_REPACK)
        no_act_order = torch.empty((codes.shape[0], 0), dtype=torch.int32, device=codes.device)
        return repack(b_q_weight=gptq_pack(codes, self.bits), perm=no_act_order, size_k=size_k, size_n=size_n, num_bits=self.bits)

    def _permute_scales(self, scale: torch.Tensor, size_k: int, size_n: int) -> torch.Tensor:
        permute = provider.function(contract.MARLIN_MOE_PERMUTE_SCALES)
        return permute(s=by_group(scale, self.config.dtype), size_k=size_k, size_n=size_n, group_size=self.group_size)

    def _zero_points(self, zero: torch.Tensor, size_n: int) -> torch.Tensor:
        pack_zero_points = provider.function(contract.MARLIN_ZERO_POINTS)
        per_group = by_group(zero, torch.int32)
        groups = per_group.shape[1]
        return torch.stack([pack_zero_points(zp=zp, size_k=groups, size_n=size_n, num_bits=self.bits) for zp in per_group])

    def forward(self, hidden_states, weights, routing, *, expert_map, apply_router_weight_on_input):
        fused_marlin_moe = provider.function(contract.FUSED_MARLIN_MOE)
        return fused_marlin_moe(
            hidden_states=hidden_states.contiguous(),
            w1=weights.w13,
            w2=weights.w2,
            bias1=None,
            bias2=None,
            w1_scale=weights.w13_scale,
            w2_scale=weights.w2_scale,
            gating_output=None,
            topk_weights=routing.topk_weights.float(),
            topk_ids=routing.topk_ids.to(torch.int32),
            quant_type_id=provider.scalar_type_id(self.scalar_type),
            apply_router_weight_on_input=apply_router_weight_on_input,
            global_num_experts=self.config.num_experts,
            activation=contract.ACTIVATION,
            expert_map=expert_map,
            global_scale1=weights.w13_global_scale,
            global_scale2=weights.w2_global_scale,
            w1_zeros=weights.w13_zero,
            w2_zeros=weights.w2_zero,
        )
