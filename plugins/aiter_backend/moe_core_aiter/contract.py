"""The argument contract of the AITER functions this binding calls, recorded as data.

Read from ROCm/aiter at :data:`AITER_COMMIT` (``aiter/fused_moe.py``, ``aiter/ops/shuffle.py``,
``csrc/include/aiter_enum.h``, ``aiter/utility/dtypes.py``). The binding looks its functions up
through these records, and ``tests/test_contract.py`` checks every call it makes binds to them.
"""

from __future__ import annotations

from moe_core.provider import FunctionContract

#: The ROCm/aiter commit the records below were read from.
AITER_COMMIT = "e4048607a535ace3a2b51ded31b1c8c2d45c0879"


#: ``aiter/fused_moe.py: fused_moe`` — w1 [E, 2I, H] (gate rows then up rows), w2 [E, H, I].
FUSED_MOE = FunctionContract(
    module="aiter.fused_moe",
    name="fused_moe",
    parameters=(
        "hidden_states", "w1", "w2", "topk_weight", "topk_ids", "expert_mask", "activation", "quant_type",
        "doweight_stage1", "w1_scale", "w2_scale", "a1_scale", "a2_scale", "block_size_M", "num_local_tokens",
        "moe_sorting_dispatch_policy", "dtype", "hidden_pad", "intermediate_pad", "bias1", "bias2", "splitk",
        "swiglu_limit", "beta", "linear_beta", "gate_mode", "shared_w1", "shared_w2", "shared_w1_scale",
        "shared_w2_scale", "shared_expert_id", "stage2_scatter",
    ),
    required=5,
)

#: ``aiter/ops/shuffle.py: shuffle_weight`` — asserts rows % layout[0] == 0 and cols % (2 * layout[1]) == 0.
SHUFFLE_WEIGHT = FunctionContract(
    module="aiter.ops.shuffle",
    name="shuffle_weight",
    parameters=("x", "layout", "use_int4", "is_guinterleave", "gate_up", "pad_k_to"),
    required=1,
)

#: The (16, 16) tile ``shuffle_weight`` uses by default, which the fused-MoE kernels read.
SHUFFLE_LAYOUT = (16, 16)

#: Module that re-exports the pybind11 enums (``from .ops.enum import *`` in ``aiter/__init__.py``).
ENUM_MODULE = "aiter"

#: Enum members the binding uses, with their values in ``csrc/include/aiter_enum.h``.
ENUMS: dict[str, dict[str, int]] = {
    "ActivationType": {"Silu": 0, "Gelu": 1},
    "QuantType": {"No": 0, "per_Tensor": 1, "per_Token": 2, "per_128x128": 5},
}

#: ``aiter.dtypes.fp8``: the fp8 dtype AITER's kernels take, per architecture (``defaultDtypes``).
FP8_DTYPE_BY_ARCH = {"gfx942": "float8_e4m3fnuz", "gfx950": "float8_e4m3fn"}
