"""What this plugin expects of vLLM's compiled Marlin MoE ops library, recorded as data.

The ops and their schemas were read from the ``vllm/_moe_C_stable_libtorch.abi3.so`` of the vLLM
:data:`VLLM_VERSION` wheel (the schema strings it registers; ``strings`` on the file shows them) and
agree with ``csrc/moe/torch_bindings.cpp`` of that generation; the argument meanings from
``csrc/moe/marlin_moe_wna16/ops.cu`` and the calls ``fused_marlin_moe`` (``vllm/model_executor/layers/
fused_moe/experts/marlin_moe.py`` in the wheel) makes. Once the library is loaded,
:mod:`moe_core.ops_library` compares each op's ``torch.ops._moe_C.<op>.default._schema`` with these
and refuses a library that differs.

The plugin needs nothing else of vLLM: it repacks weights itself (:mod:`moe_core_marlin.repack`) and
does the glue between the two GEMMs in torch (:mod:`moe_core_marlin.glue`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from moe_core.ops_library import OpContract

#: The vLLM release the schemas and the layouts were read from (its wheel pins torch==2.11.0).
VLLM_VERSION = "0.26.0"
#: The library's file name inside the vLLM package, and the namespace its ops register under.
LIBRARY_FILE = "_moe_C_stable_libtorch.abi3.so"
NAMESPACE = "_moe_C"


#: The Marlin MoE GEMM: ``c[sorted rows] = a[rows // top_k] @ dequant(b[expert])`` per block of
#: ``moe_block_size`` expert-sorted rows, optionally times the row's router weight.
MOE_WNA16_MARLIN_GEMM = OpContract(
    NAMESPACE, "moe_wna16_marlin_gemm",
    "moe_wna16_marlin_gemm(Tensor! a, Tensor? c_or_none, Tensor! b_q_weight, Tensor? b_bias_or_none, "
    "Tensor! b_scales, Tensor? a_scales, Tensor? global_scale, Tensor? b_zeros_or_none, Tensor? g_idx_or_none, "
    "Tensor? perm_or_none, Tensor! workspace, Tensor sorted_token_ids, Tensor! expert_ids, "
    "Tensor! num_tokens_past_padded, Tensor! topk_weights, int moe_block_size, int top_k, bool mul_topk_weights, "
    "int b_type_id, int size_m, int size_n, int size_k, bool is_full_k, bool use_atomic_add, bool use_fp32_reduce, "
    "bool is_zp_float, int thread_k, int thread_n, int blocks_per_sm) -> Tensor",
)
#: Sorts the (token, k) pairs by expert into blocks of ``block_size`` rows (padded with the pair count).
MOE_ALIGN_BLOCK_SIZE = OpContract(
    NAMESPACE, "moe_align_block_size",
    "moe_align_block_size(Tensor topk_ids, int num_experts, int block_size, Tensor! sorted_token_ids, "
    "Tensor! experts_ids, Tensor! num_tokens_post_pad, Tensor? maybe_expert_map) -> ()",
)

#: The ops the binding calls; each must be registered with exactly this schema.
OPS = (MOE_WNA16_MARLIN_GEMM, MOE_ALIGN_BLOCK_SIZE)

#: vLLM's ``ScalarType`` of each scheme's codes: GPTQ-style unsigned with a symmetric bias (uint4b8: q + 8,
#: uint8b128: q + 128), AWQ-style uint4 with zero points, float8_e4m3fn (read as 8 bits) and float4_e2m1f
#: (4 bits; the GEMM tells nvfp4 from mxfp4 by the scales' dtype, float8_e4m3fn or float8_e8m0fnu).
SCALAR_TYPE_BY_SCHEME = {
    "w4a16": "uint4b8", "w4a16-zp": "uint4", "w8a16": "uint8b128",
    "fp8-w8a16": "float8_e4m3fn", "fp8-block-w8a16": "float8_e4m3fn",
    "nvfp4-w4a16": "float4_e2m1f", "mxfp4": "float4_e2m1f",
}
#: The fp8 schemes (weights float8_e4m3fn, scales in the activation dtype, no zero points).
FP8_SCHEMES = ("fp8-w8a16", "fp8-block-w8a16")

#: ``MARLIN_SUPPORTED_GROUP_SIZES`` (-1: one group over the whole K).
SUPPORTED_GROUP_SIZES = (-1, 32, 64, 128)
#: The MoE kernels are compiled for float8_e4m3fn weights with channelwise scales or groups of 128 only;
#: 128x128 blocks become groups of 128 along K, each block scale repeated over its 128 output channels.
FP8_GROUP_SIZES = (-1, 128)
#: fp4 block sizes along K: nvfp4 scales per 16, mxfp4 per 32 (``prepare_moe_fp4_layer_for_marlin``).
NVFP4_GROUP_SIZE = 16
MXFP4_GROUP_SIZE = 32
#: Marlin's MXFP4 MoE kernels with 16-bit activations are built for bfloat16 only (generate_kernels.py,
#: read at an earlier commit of the same kernel generation; not re-read for this release).
MXFP4_DTYPES = (torch.bfloat16,)
#: ``check_moe_marlin_supports_layer``: hidden_size % 128 and intermediate_size % max(64, group) must be 0.
HIDDEN_MULTIPLE = 128
INTERMEDIATE_MIN_MULTIPLE = 64
#: Marlin's fp8 dequantization skips the exponent-bias correction: the scales carry it,
#: 2**(2**(e - 1) - 2**3) for a 16-bit activation dtype with e exponent bits (2**8 float16, 2**120 bfloat16).
FP8_EXPONENT_BIAS = {torch.float16: 2.0**8, torch.bfloat16: 2.0**120}
#: Row-block sizes the kernel takes; ``fused_marlin_moe`` picks the smallest whose average fill per
#: expert stays below :data:`BLOCK_FILL`, else the largest.
BLOCK_SIZES_M = (8, 16, 32, 48, 64)
BLOCK_FILL = 0.9
#: Workspace: one int32 lock per thread block, ``blocks_per_sm`` (4) per SM (``marlin_make_workspace_new``).
WORKSPACE_BLOCKS_PER_SM = 4


@dataclass(frozen=True)
class ScalarType:
    """vLLM's ``ScalarType`` fields; :attr:`id` is the ``b_type_id`` the GEMM takes.

    The id packs, from bit 0: exponent (8 bits), mantissa (8), signed (1), bias (32), finite values
    only (1), NaN representation (8: 0 none, 1 IEEE 754, 2 extended range) -- ``ScalarType.id`` in
    ``vllm/scalar_type.py`` of :data:`VLLM_VERSION`, kept in sync there with the C++ ``from_id``.
    """

    exponent: int
    mantissa: int
    signed: bool
    bias: int = 0
    finite_values_only: bool = False
    nan_repr: int = 1

    @property
    def id(self) -> int:
        fields = ((self.exponent, 8), (self.mantissa, 8), (int(self.signed), 1), (self.bias, 32),
                  (int(self.finite_values_only), 1), (self.nan_repr, 8))
        value, offset = 0, 0
        for field, width in fields:
            value |= (field & ((1 << width) - 1)) << offset
            offset += width
        return value


#: The scalar types of :data:`SCALAR_TYPE_BY_SCHEME` (``scalar_types`` in vllm/scalar_type.py).
SCALAR_TYPES = {
    "uint4b8": ScalarType(0, 4, False, bias=8),
    "uint4": ScalarType(0, 4, False),
    "uint8b128": ScalarType(0, 8, False, bias=128),
    "float8_e4m3fn": ScalarType(4, 3, True, finite_values_only=True, nan_repr=2),
    "float4_e2m1f": ScalarType(2, 1, True, finite_values_only=True, nan_repr=0),
}
