"""The argument contract of the vLLM functions this binding calls, recorded as data.

Read from vllm-project/vllm: ``vllm/model_executor/layers/fused_moe/fused_marlin_moe.py`` and
``vllm/_custom_ops.py`` at :data:`VLLM_COMMIT`, ``vllm/model_executor/layers/quantization/utils/
marlin_utils.py`` at :data:`VLLM_MARLIN_UTILS_COMMIT`, ``.../utils/marlin_utils_fp8.py`` at
:data:`VLLM_MARLIN_FP8_UTILS_COMMIT`, ``.../utils/marlin_utils_fp4.py`` at
:data:`VLLM_MARLIN_FP4_UTILS_COMMIT` and ``csrc/moe/marlin_moe_wna16/generate_kernels.py`` at
:data:`VLLM_MARLIN_KERNELS_COMMIT` (with ``ops.cu`` at :data:`VLLM_MARLIN_OPS_COMMIT`). The binding
looks its functions up through these records (:data:`READ_AT` names each one's commit), and
``tests/test_marlin_contract.py`` checks every call it makes binds to them.
"""

from __future__ import annotations

import torch

from moe_core.provider import FunctionContract

#: The vllm-project/vllm commit fused_marlin_moe.py and _custom_ops.py were read from.
VLLM_COMMIT = "00a130a03146d74300d01c0bcf806f323f887fbb"
#: The commit marlin_utils.py was read from (the constants and the scale/zero-point helpers).
VLLM_MARLIN_UTILS_COMMIT = "007d50058a06dec0f82472d63c819244d460c40d"
#: The commit marlin_utils_fp8.py (pack_fp8_to_int32, fp8_fused_exponent_bias_into_scales) was read from.
#: The source index holds no copy of that file at the two commits above; this one is of the same
#: generation (its helpers pass ``is_a_8bit`` / ``input_dtype``, as marlin_utils.py at
#: VLLM_MARLIN_UTILS_COMMIT and fused_marlin_moe.py at VLLM_COMMIT do).
VLLM_MARLIN_FP8_UTILS_COMMIT = "ee52d9901d368da35a80048c299ccb53e78a9a01"
#: The commit marlin_utils_fp4.py (nvfp4_marlin_process_scales, mxfp4_marlin_process_scales,
#: nvfp4_marlin_process_global_scale; the steps of prepare_moe_fp4_layer_for_marlin) was read from. The
#: index holds no copy at the commits above; of the two it holds, this one is of their generation: its
#: helpers pass ``is_a_8bit`` / ``input_dtype`` and its ``nvfp4_marlin_process_global_scale`` takes and
#: returns a float16 / bfloat16 global scale, which is what ops.cu at VLLM_MARLIN_OPS_COMMIT checks
#: (``global_scale.scalar_type() == c.scalar_type()``, read as uint16). The other stored copy (00d52e93)
#: is later: float32 global scales and a ``scale_factor`` that a later ops.cu goes with.
VLLM_MARLIN_FP4_UTILS_COMMIT = "de5f26d5923e2b31dbb3d80efc45d5fd41f09946"
#: The commit csrc/moe/marlin_moe_wna16/generate_kernels.py (which kernels are compiled) was read from
#: (not stored at VLLM_COMMIT either; same generation: a_type / is_a_8bit kernels).
VLLM_MARLIN_KERNELS_COMMIT = "52ef833e58d28e3bc9dd8ba68942896d92979cca"
#: The commit csrc/moe/marlin_moe_wna16/ops.cu (moe_wna16_marlin_gemm's checks) was read from: fp8 weights
#: take scales of the activation dtype (s_type = c_type), [E, K/group, N] with group = K / b_scales.size(1).
VLLM_MARLIN_OPS_COMMIT = "fb4ff9fa3db7b11295189afeacaa1bd94b7546fc"


_MARLIN_UTILS = "vllm.model_executor.layers.quantization.utils.marlin_utils"
_MARLIN_UTILS_FP8 = "vllm.model_executor.layers.quantization.utils.marlin_utils_fp8"
_MARLIN_UTILS_FP4 = "vllm.model_executor.layers.quantization.utils.marlin_utils_fp4"

#: ``fused_marlin_moe``: w1 [E, K/16, 2N * bits/2] and w2 [E, N/16, K * bits/2] in Marlin layout,
#: w1 rows gate then up (``silu_and_mul`` reads the first half as gate); topk_weights float32.
FUSED_MARLIN_MOE = FunctionContract(
    module="vllm.model_executor.layers.fused_moe.fused_marlin_moe",
    name="fused_marlin_moe",
    parameters=(
        "hidden_states", "w1", "w2", "bias1", "bias2", "w1_scale", "w2_scale", "gating_output", "topk_weights",
        "topk_ids", "quant_type_id", "apply_router_weight_on_input", "global_num_experts", "activation",
        "activation_func", "moe_sum", "expert_map", "input_global_scale1", "input_global_scale2", "global_scale1",
        "global_scale2", "g_idx1", "g_idx2", "sort_indices1", "sort_indices2", "w1_zeros", "w2_zeros", "workspace",
        "intermediate_cache13", "intermediate_cache2", "is_k_full", "output", "input_dtype", "inplace",
    ),
    required=11,
)

#: ``gptq_marlin_moe_repack``: b_q_weight [E, K/pack, N] int32 (GPTQ packing along K), perm [E, 0] int32
#: (no act-order) -> [E, K/16, N * bits/2] int32 through ``torch.ops._C.gptq_marlin_repack`` per expert.
GPTQ_MARLIN_MOE_REPACK = FunctionContract(
    module="vllm._custom_ops",
    name="gptq_marlin_moe_repack",
    parameters=("b_q_weight", "perm", "size_k", "size_n", "num_bits", "is_a_8bit"),
    required=5,
)

#: ``marlin_moe_permute_scales``: s [E, K/group, N] in the activation dtype -> the same shape, Marlin-permuted.
MARLIN_MOE_PERMUTE_SCALES = FunctionContract(
    module=_MARLIN_UTILS,
    name="marlin_moe_permute_scales",
    parameters=("s", "size_k", "size_n", "group_size", "is_a_8bit"),
    required=4,
)

#: ``marlin_zero_points``: zp [K/group, N] int32 codes of one expert -> [K/group, N * bits/32] int32, packed.
MARLIN_ZERO_POINTS = FunctionContract(
    module=_MARLIN_UTILS,
    name="marlin_zero_points",
    parameters=("zp", "size_k", "size_n", "num_bits", "is_a_8bit"),
    required=4,
)

#: ``pack_fp8_to_int32`` (marlin_utils_fp8, at VLLM_MARLIN_FP8_UTILS_COMMIT): one expert's float8_e4m3fn
#: weight, [N, K] with ``size_k_first=False``, -> int32 [N, K/4], four consecutive k per word (the
#: bytes reinterpreted); vLLM's ``prepare_moe_fp8_layer_for_marlin`` transposes it to [K/4, N] for the repack.
PACK_FP8_TO_INT32 = FunctionContract(
    module=_MARLIN_UTILS_FP8,
    name="pack_fp8_to_int32",
    parameters=("fp8_tensor", "size_k_first"),
    required=1,
)

#: ``fp8_fused_exponent_bias_into_scales`` (marlin_utils_fp8, at VLLM_MARLIN_FP8_UTILS_COMMIT): Marlin's
#: fp8 dequantization skips the exponent-bias correction, so the (already permuted) float16 / bfloat16
#: scales are multiplied by 2**8 / 2**120; ``prepare_moe_fp8_layer_for_marlin`` does it whenever the
#: activations are not fp8.
FP8_FUSED_EXPONENT_BIAS_INTO_SCALES = FunctionContract(
    module=_MARLIN_UTILS_FP8,
    name="fp8_fused_exponent_bias_into_scales",
    parameters=("scales",),
    required=1,
)

#: ``nvfp4_marlin_process_scales`` (marlin_utils_fp4, at VLLM_MARLIN_FP4_UTILS_COMMIT): one expert's
#: permuted nvfp4 scales [K/16, N] in float16 / bfloat16 -> float8_e4m3fn [K/16, N] in Marlin's
#: "S0E5M3" form (converted to half, columns reordered [0, 2, 1, 3] in fours, times 2**7, the sign bit
#: shifted out). It is 2-D only (it reshapes by ``size(0)``), so the binding calls it per expert, as
#: ``prepare_moe_fp4_layer_for_marlin`` does; it assumes every scale is >= 0 and, for the kept top bit
#: to be 1, every non-zero scale >= 2**-6 (an e4m3 normal).
NVFP4_MARLIN_PROCESS_SCALES = FunctionContract(
    module=_MARLIN_UTILS_FP4,
    name="nvfp4_marlin_process_scales",
    parameters=("marlin_scales",),
    required=1,
)

#: ``mxfp4_marlin_process_scales`` (marlin_utils_fp4, at VLLM_MARLIN_FP4_UTILS_COMMIT): one expert's
#: permuted mxfp4 scales [K/32, N] (powers of two in the activation dtype) -> float8_e8m0fnu [K/32, N],
#: columns reordered [0, 2, 1, 3] in fours when ``input_dtype`` is None or 16-bit (16-bit activations).
MXFP4_MARLIN_PROCESS_SCALES = FunctionContract(
    module=_MARLIN_UTILS_FP4,
    name="mxfp4_marlin_process_scales",
    parameters=("marlin_scales", "input_dtype"),
    required=1,
)

#: ``nvfp4_marlin_process_global_scale`` (marlin_utils_fp4, at VLLM_MARLIN_FP4_UTILS_COMMIT): the global
#: scale, float16 or bfloat16 (it asserts so), times 2**(exponent bias - 7) -- 2**7 for float16, 2**119
#: for bfloat16 -- the fp4 -> 16-bit exponent bias Marlin's dequantization skips. vLLM passes one per
#: expert, [E] (ModelOpt's w13_weight_scale_2[:, 0]), cast to the activation dtype first.
NVFP4_MARLIN_PROCESS_GLOBAL_SCALE = FunctionContract(
    module=_MARLIN_UTILS_FP4,
    name="nvfp4_marlin_process_global_scale",
    parameters=("global_scale",),
    required=1,
)

#: Every function record and the vLLM commit it was read from.
READ_AT = {
    FUSED_MARLIN_MOE: VLLM_COMMIT,
    GPTQ_MARLIN_MOE_REPACK: VLLM_COMMIT,
    MARLIN_MOE_PERMUTE_SCALES: VLLM_MARLIN_UTILS_COMMIT,
    MARLIN_ZERO_POINTS: VLLM_MARLIN_UTILS_COMMIT,
    PACK_FP8_TO_INT32: VLLM_MARLIN_FP8_UTILS_COMMIT,
    FP8_FUSED_EXPONENT_BIAS_INTO_SCALES: VLLM_MARLIN_FP8_UTILS_COMMIT,
    NVFP4_MARLIN_PROCESS_SCALES: VLLM_MARLIN_FP4_UTILS_COMMIT,
    MXFP4_MARLIN_PROCESS_SCALES: VLLM_MARLIN_FP4_UTILS_COMMIT,
    NVFP4_MARLIN_PROCESS_GLOBAL_SCALE: VLLM_MARLIN_FP4_UTILS_COMMIT,
}

#: Module and attribute holding vLLM's ScalarType constants; the binding passes ``.id`` as quant_type_id.
SCALAR_TYPES_MODULE = "vllm.scalar_type"
SCALAR_TYPES_ATTR = "scalar_types"

#: moe-core scheme -> the vLLM ScalarType its codes are (``query_marlin_supported_quant_types``):
#: GPTQ-style unsigned with a symmetric bias (uint4b8: q + 8, uint8b128: q + 128), AWQ-style uint4 + zero point,
#: float8_e4m3fn for fp8 weights (fused_marlin_moe accepts it and reads it as 8 bits), and float4_e2m1f
#: for nvfp4 and mxfp4 weights (4 bits; moe_wna16_marlin_gemm tells them apart by the scales' dtype:
#: float8_e4m3fn -> nvfp4, float8_e8m0fnu -> mxfp4, ops.cu at VLLM_MARLIN_OPS_COMMIT).
SCALAR_TYPE_BY_SCHEME = {
    "w4a16": "uint4b8", "w4a16-zp": "uint4", "w8a16": "uint8b128",
    "fp8-w8a16": "float8_e4m3fn", "fp8-block-w8a16": "float8_e4m3fn",
    "nvfp4-w4a16": "float4_e2m1f", "mxfp4": "float4_e2m1f",
}
#: The fp8 schemes (weights float8_e4m3fn, scales in the activation dtype, no zero points).
FP8_SCHEMES = ("fp8-w8a16", "fp8-block-w8a16")
#: The fp4 weight-only schemes (e2m1 codes; nvfp4 with e4m3 scales and a global scale, mxfp4 with e8m0).
FP4_SCHEMES = ("nvfp4-w4a16", "mxfp4")

#: ``MARLIN_SUPPORTED_GROUP_SIZES`` (-1: one group over the whole K).
SUPPORTED_GROUP_SIZES = (-1, 32, 64, 128)
#: Weight group sizes along K the MoE kernels are compiled for with float8_e4m3fn weights: generate_kernels.py
#: builds kFE4M3fn only with group_blocks -1 (channelwise) and 8 (16 * 8 = 128). 128x128 blocks become
#: groups of 128 along K with each block scale repeated over its 128 output channels, as
#: ``prepare_moe_fp8_layer_for_marlin`` does for ``weight_block_size``.
FP8_GROUP_SIZES = (-1, 128)
#: Group sizes along K the MoE kernels are compiled for with float4_e2m1f weights: generate_kernels.py
#: builds NVFP4 (s_type kFE4M3fn) with group_blocks [1] (16) and MXFP4 (kFE8M0fnu) with [2] (32) only;
#: ``prepare_moe_fp4_layer_for_marlin`` uses 16 for nvfp4 and 32 for mxfp4.
NVFP4_GROUP_SIZE = 16
MXFP4_GROUP_SIZE = 32
#: generate_kernels.py compiles the MXFP4 kernels with 16-bit activations for ``a_type`` kBFloat16 only
#: (and skips a 16-bit c_type that differs from a_type), so float16 mxfp4 layers have no kernel.
MXFP4_DTYPES = (torch.bfloat16,)
#: The smallest non-zero nvfp4 block scale nvfp4_marlin_process_scales keeps exactly at
#: VLLM_MARLIN_FP4_UTILS_COMMIT: it needs scale * 2**7 >= 2 (the top bit of its S0E5M3 byte set);
#: e4m3 subnormals below it do not get that bit (later vLLM rescales all scales by a power of two for
#: exactly these, dividing the global scale back; this one does not).
NVFP4_MIN_SCALE = 2.0**-6
#: ``check_moe_marlin_supports_layer``: hidden_size % 128 and intermediate_size % max(64, group) must be 0.
HIDDEN_MULTIPLE = 128
INTERMEDIATE_MIN_MULTIPLE = 64
#: The only activation ``default_activation_func`` runs that moe-core has.
ACTIVATION = "silu"
