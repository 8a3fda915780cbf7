"""fp8 token rows: hidden states sent as the fp8 activation groups an fp8-block layer's experts compute anyway.

An fp8-block layer (activations fp8 e4m3 with a dynamic float32 scale per group of 128 values along the hidden
dimension) quantizes its input before GEMM1. With ``ExpertParallelGroup(fp8_dispatch=True)`` a token-row
dispatcher (:mod:`moe_core.dispatch.token_rows`) does that quantization on the sending rank: a row carries
``H`` fp8 codes and ``ceil(H / 128)`` scales instead of ``H`` 16-bit values (7392 instead of 14336 bytes at
DeepSeek-V3's hidden size of 7168), and the receiver dequantizes them to the layer's dtype before its experts
run. The experts quantize the received values again and get the codes that were sent back: a 16-bit rounding of
a dequantized value moves it by far less than half an fp8 step. The combine is unchanged (the experts' outputs
are 16-bit).
"""

from __future__ import annotations

import torch

from moe_core.dispatch.base import Dispatcher, ExpertParallelGroup
from moe_core.errors import InvalidConfigError
from moe_core.quant import QuantKey, describe_keys, kFp8Dynamic128Sym
from moe_core.quantization.qtensor import QTensor, dequantize, quantize, scale_shape

#: The activation key whose groups fp8 rows carry.
KEY = kFp8Dynamic128Sym


def groups(hidden_size: int) -> int:
    """Scales per row: one per 128 hidden values (the last group may be shorter)."""
    return scale_shape(KEY.group, (1, hidden_size))[-1]


def check_fp8_dispatch(group: ExpertParallelGroup, dispatcher: Dispatcher, weight_key: QuantKey | None,
                       activation_key: QuantKey | None) -> None:
    """Raise :class:`InvalidConfigError` when ``group`` asks for fp8 rows that this layer cannot use: activations
    not quantized to fp8 groups of 128 (the codes would change the layer's numerics), or a dispatcher that does not
    send token rows (:attr:`~moe_core.dispatch.base.Dispatcher.fp8_rows`)."""
    if not group.fp8_dispatch:
        return
    if activation_key != KEY:
        raise InvalidConfigError(
            f"ExpertParallelGroup.fp8_dispatch sends the fp8 activation groups of an fp8-block layer ({KEY}); this layer "
            f"is {describe_keys(weight_key, activation_key)}: leave fp8_dispatch off")
    if not dispatcher.fp8_rows:
        raise InvalidConfigError(
            f"ExpertParallelGroup.fp8_dispatch needs a token-row dispatcher (packed_all_to_all or peer_copy), got "
            f"{type(dispatcher).__name__}: set ParallelConfig.dispatch_backend or leave fp8_dispatch off")


def quantize_rows(hidden_states: torch.Tensor) -> QTensor:
    """``[n, H]`` hidden states as fp8 codes ``[n, H]`` and float32 scales ``[n, groups(H)]``."""
    return quantize(hidden_states, KEY)


def dequantize_rows(codes: torch.Tensor, scales: torch.Tensor, out: torch.Tensor) -> None:
    """Write the values of fp8 ``codes`` ``[n, H]`` and their ``scales`` ``[n, groups(H)]`` (views of received rows)
    into ``out`` ``[n, H]``, in ``out``'s dtype."""
    out.copy_(dequantize(QTensor(codes, scales, KEY, tuple(codes.shape))))
