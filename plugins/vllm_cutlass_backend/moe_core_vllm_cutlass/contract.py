"""What this plugin expects of vLLM's compiled ``_C`` ops library, recorded as data.

The schemas are the strings the ``vllm/_C_stable_libtorch.abi3.so`` of the vLLM :data:`VLLM_VERSION`
wheel registers (``strings`` on the file shows them). The argument layouts were read from that
generation's ``csrc/quantization/w8a8/cutlass/moe/`` (``moe_data.cu``: the permutations and problem
sizes; ``get_group_starts.cuh``: where each expert's A, B, C and scales start) and from
``vllm/model_executor/layers/fused_moe/experts/cutlass_moe.py`` in the wheel. Once the library is
loaded, :mod:`moe_core.ops_library` compares each op's registered schema with these and refuses a
library that differs.
"""

from __future__ import annotations

from moe_core.ops_library import OpContract

#: The vLLM release the schemas and layouts were read from (its wheel pins torch==2.11.0).
VLLM_VERSION = "0.26.0"
#: The library's file name inside the vLLM package (78.8 MB in that wheel), and its ops' namespace.
LIBRARY_FILE = "_C_stable_libtorch.abi3.so"
NAMESPACE = "_C"

#: The grouped fp8 GEMM: for each expert e, ``out[o_e:o_e+m_e] = (a[o_e:o_e+m_e] @ b[e].T) * scales``, with
#: ``o_e = expert_offsets[e]`` (int64), ``m_e`` from ``problem_sizes[e]``, ``b`` [E, N, K] fp8, ``a`` [M, K] fp8,
#: ``out`` [M, N] float16/bfloat16, ``a_scales`` float32 (1 value, or one per row of ``a``) and ``b_scales``
#: float32 (one per expert, or [E, N]); the stride tensors are int64 [E] (K for a and b, N for out).
CUTLASS_MOE_MM = OpContract(
    NAMESPACE, "cutlass_moe_mm",
    "cutlass_moe_mm(Tensor! out_tensors, Tensor a_tensors, Tensor b_tensors, Tensor a_scales, Tensor b_scales, "
    "Tensor expert_offsets, Tensor problem_sizes, Tensor a_strides, Tensor b_strides, Tensor c_strides, "
    "bool per_act_token, bool per_out_ch) -> ()",
)
#: Sorts the (token, k) pairs by expert: ``expert_offsets`` int32 [E + 1] (prefix sums of the pair counts),
#: ``problem_sizes1/2`` int32 [E, 3], ``input_permutation`` int32 [T*k] (sorted row -> token),
#: ``output_permutation`` int32 [T*k] (pair -> sorted row; a pair whose id is -1 gets the number of valid
#: pairs). ``n`` is the intermediate size, ``k`` the hidden size; ``is_gated`` makes GEMM1's N = 2n.
GET_CUTLASS_MOE_MM_DATA = OpContract(
    NAMESPACE, "get_cutlass_moe_mm_data",
    "get_cutlass_moe_mm_data(Tensor topk_ids, Tensor! expert_offsets, Tensor! problem_sizes1, Tensor! problem_sizes2, "
    "Tensor! input_permutation, Tensor! output_permutation, int num_experts, int n, int k, Tensor? blockscale_offsets, "
    "bool is_gated) -> ()",
)
#: The batched format's problem sizes: expert e's rows start at ``e * padded_m`` (``expert_offsets`` int32 [E]),
#: ``expert_num_tokens[e]`` (int32) of them; ``problem_sizes1/2`` as above (A and B swapped when E * padded_m <= 64).
GET_CUTLASS_BATCHED_MOE_MM_DATA = OpContract(
    NAMESPACE, "get_cutlass_batched_moe_mm_data",
    "get_cutlass_batched_moe_mm_data(Tensor! expert_offsets, Tensor! problem_sizes1, Tensor! problem_sizes2, "
    "Tensor expert_num_tokens, int num_local_experts, int padded_m, int n, int k) -> ()",
)
#: Whether the library's grouped GEMM runs on a compute capability (major * 10 + minor).
CUTLASS_GROUP_GEMM_SUPPORTED = OpContract(
    NAMESPACE, "cutlass_group_gemm_supported", "cutlass_group_gemm_supported(int cuda_device_capability) -> bool",
)

#: The ops the binding calls; each must be registered with exactly this schema.
OPS = (CUTLASS_MOE_MM, GET_CUTLASS_MOE_MM_DATA, GET_CUTLASS_BATCHED_MOE_MM_DATA, CUTLASS_GROUP_GEMM_SUPPORTED)

#: ``cutlass_group_gemm_supported``: sm90 with CUDA 12.3+, sm100 and later with CUDA 12.8+ (the wheel's
#: library is built with CUDA 13, so from 9.0 on).
MIN_CAPABILITY = (9, 0)
#: The (weight, activation) schemes ``CutlassExpertsFp8`` accepts: per-tensor weights with static or dynamic
#: per-tensor activations, per-channel weights with dynamic per-token activations.
SCHEMES = ("fp8-tensor", "fp8-tensor-dyn", "fp8-channel")
#: Rows of the grouped GEMM's A up to which vLLM swaps A and B (``SWAP_AB_THRESHOLD`` in moe_data.cu): the
#: problem sizes and the GEMM's dispatch both key on it, so A must have exactly T*k (batched: E * M) rows.
SWAP_AB_THRESHOLD = 64
