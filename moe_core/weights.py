"""The typed expert-weights container of the kernel contract.

``w13`` stacks the gate and up projections of every expert as ``[E, 2I, H]``: rows ``[0, I)`` are
the gate, rows ``[I, 2I)`` the up projection (``GateUpOrder.GATE_UP``). Checkpoints that store up
first say ``order=GateUpOrder.UP_GATE``; every kernel's ``prepare_weights`` reorders them once.
``w2`` is ``[E, H, I]``. Quantized weights follow the layouts of :mod:`moe_core.quantization.qtensor`
(packed 4-bit types halve the last dimension).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

import torch

from moe_core.config import MoEConfig
from moe_core.errors import KernelInputError
from moe_core.quant import QuantDtype, QuantKey
from moe_core.quantization.qtensor import QTensor, quantize, scale_shape

_DATA_DTYPES = {
    QuantDtype.FP8_E4M3: (torch.float8_e4m3fn,),
    QuantDtype.INT8: (torch.int8, torch.uint8),
    QuantDtype.INT4: (torch.uint8,),
    QuantDtype.FP4_E2M1: (torch.uint8,),
}


class GateUpOrder(enum.Enum):
    GATE_UP = "gate_up"
    UP_GATE = "up_gate"


@dataclass(frozen=True, eq=False)
class ExpertWeights:
    """Expert weights of one layer, unquantized or quantized by ``weight_key``.

    Attributes:
        w13, w2: gate/up and down projections (see module docstring), unquantized in a float dtype
            or quantized codes.
        weight_key: how the weights are quantized (None: unquantized).
        w13_scale, w2_scale, w13_zero, w2_zero, w13_global_scale, w2_global_scale: the scales of
            :class:`~moe_core.quantization.qtensor.QTensor` for each projection.
        a13_scale, a2_scale: static activation scales ([1, 1]) for static activation keys.
        order: gate/up order of ``w13`` rows.
        prepared_by: the backend whose ``prepare_weights`` produced this container, or None for
            weights in the canonical layout.
    """

    w13: torch.Tensor
    w2: torch.Tensor
    weight_key: QuantKey | None = None
    w13_scale: torch.Tensor | None = None
    w2_scale: torch.Tensor | None = None
    w13_zero: torch.Tensor | None = None
    w2_zero: torch.Tensor | None = None
    w13_global_scale: torch.Tensor | None = None
    w2_global_scale: torch.Tensor | None = None
    a13_scale: torch.Tensor | None = None
    a2_scale: torch.Tensor | None = None
    order: GateUpOrder = GateUpOrder.GATE_UP
    prepared_by: str | None = None

    @property
    def num_experts(self) -> int:
        return self.w13.shape[0]

    @property
    def hidden_size(self) -> int:
        return self.w2.shape[1]

    @property
    def intermediate_size(self) -> int:
        return self.w13.shape[1] // 2

    @property
    def device(self) -> torch.device:
        return self.w13.device

    def qtensors(self) -> tuple[QTensor, QTensor]:
        """The two projections as QTensors (quantized weights only)."""
        if self.weight_key is None:
            raise KernelInputError("weights", "unquantized weights have no QTensor view")
        e, i2, h = self.num_experts, self.w13.shape[1], self.hidden_size
        i = i2 // 2
        return (
            QTensor(self.w13, self.w13_scale, self.weight_key, (e, i2, h), self.w13_zero, self.w13_global_scale),
            QTensor(self.w2, self.w2_scale, self.weight_key, (e, h, i), self.w2_zero, self.w2_global_scale),
        )

    def shard(self, rank: int, ep_size: int) -> "ExpertWeights":
        """The experts expert-parallel rank ``rank`` of ``ep_size`` holds: ``[rank * L, (rank + 1) * L)``, ``L = E / ep_size``.

        Views, not copies; per-expert scales, zero points and global scales are sliced with them,
        static activation scales are shared. The placement is the one moe-core's dispatchers use.
        """
        if ep_size < 1 or self.num_experts % ep_size or not 0 <= rank < ep_size:
            raise KernelInputError("weights", f"cannot take shard {rank} of {ep_size} from {self.num_experts} experts "
                                              "(ep_size must divide the experts, 0 <= rank < ep_size)")
        per_rank = self.num_experts // ep_size
        part = slice(rank * per_rank, (rank + 1) * per_rank)
        names = ("w13", "w2", "w13_scale", "w2_scale", "w13_zero", "w2_zero", "w13_global_scale", "w2_global_scale")
        return replace(self, **{n: getattr(self, n)[part] for n in names if getattr(self, n) is not None})

    def in_gate_up_order(self) -> "ExpertWeights":
        """The same weights with w13 rows in GATE_UP order (a copy only if they were UP_GATE)."""
        if self.order is GateUpOrder.GATE_UP:
            return self
        if self.w13_scale is not None and self.w13_scale.shape[1] not in (1, self.w13.shape[1]) and self.w13_scale.shape[1] % 2:
            raise KernelInputError("weights.w13_scale", "UP_GATE weights with blocks straddling the gate/up boundary cannot be reordered")

        def swap(t: torch.Tensor | None) -> torch.Tensor | None:
            if t is None or t.shape[1] == 1:
                return t
            half = t.shape[1] // 2  # row scales of 2-D blocks: 2I/128 rows, half gate, half up
            return torch.cat((t[:, half:], t[:, :half]), dim=1)

        return replace(self, w13=swap(self.w13), w13_scale=swap(self.w13_scale), w13_zero=swap(self.w13_zero), order=GateUpOrder.GATE_UP)

    def validate(self, config: MoEConfig, weight_key: QuantKey | None, activation_key: QuantKey | None = None) -> None:
        """Check shapes, dtypes, devices and scale shapes against the config; raise KernelInputError naming the argument."""
        if activation_key is not None and activation_key.static:
            for name in ("a13_scale", "a2_scale"):
                scale = getattr(self, name)
                if scale is None or scale.numel() != 1:
                    raise KernelInputError(f"weights.{name}", f"static activations ({activation_key}) need a calibrated [1, 1] scale, got {None if scale is None else tuple(scale.shape)}")
        if self.weight_key != weight_key:
            raise KernelInputError("weights.weight_key", f"is {self.weight_key} but the kernel was built for {weight_key}")
        e, h, i = config.local_num_experts, config.hidden_size, config.intermediate_size
        for name in ("w13", "w2"):
            t = getattr(self, name)
            if not isinstance(t, torch.Tensor) or t.dim() != 3:
                raise KernelInputError(f"weights.{name}", f"must be a 3-D tensor, got {getattr(t, 'shape', t)!r}")
            if t.shape[0] != e:
                raise KernelInputError(f"weights.{name}", f"has {t.shape[0]} experts, the config says {e} local experts")
        packed = weight_key is not None and weight_key.dtype in (QuantDtype.INT4, QuantDtype.FP4_E2M1)
        w13_last, w2_last = (h // 2, i // 2) if packed else (h, i)
        if tuple(self.w13.shape) != (e, 2 * i, w13_last):
            raise KernelInputError("weights.w13", f"expected shape {(e, 2 * i, w13_last)} ([E, 2I, H{'/2 packed' if packed else ''}]), got {tuple(self.w13.shape)}")
        if tuple(self.w2.shape) != (e, h, w2_last):
            raise KernelInputError("weights.w2", f"expected shape {(e, h, w2_last)} ([E, H, I{'/2 packed' if packed else ''}]), got {tuple(self.w2.shape)}")
        if self.w2.device != self.w13.device:
            raise KernelInputError("weights.w2", f"is on {self.w2.device} but w13 is on {self.w13.device}")
        if weight_key is None:
            if not self.w13.is_floating_point() or self.w13.dtype != self.w2.dtype:
                raise KernelInputError("weights.w13", f"unquantized weights must share one float dtype, got {self.w13.dtype} and {self.w2.dtype}")
            return
        allowed = _DATA_DTYPES[weight_key.dtype]
        for name in ("w13", "w2"):
            if getattr(self, name).dtype not in allowed:
                raise KernelInputError(f"weights.{name}", f"{weight_key.dtype.value} weights must be stored as {', '.join(map(str, allowed))}, got {getattr(self, name).dtype}")
        for name, logical in (("w13", (e, 2 * i, h)), ("w2", (e, h, i))):
            want = scale_shape(weight_key.group, logical)
            scale = getattr(self, f"{name}_scale")
            if scale is None or tuple(scale.shape) != want:
                raise KernelInputError(f"weights.{name}_scale", f"expected shape {want} for {weight_key}, got {None if scale is None else tuple(scale.shape)}")
            zero = getattr(self, f"{name}_zero")
            if not weight_key.symmetric and (zero is None or tuple(zero.shape) != want):
                raise KernelInputError(f"weights.{name}_zero", f"asymmetric {weight_key} needs zero points of shape {want}")
            if weight_key.global_scale and getattr(self, f"{name}_global_scale") is None:
                raise KernelInputError(f"weights.{name}_global_scale", f"{weight_key} needs a global scale [E, 1, 1]")


def quantize_experts(w13: torch.Tensor, w2: torch.Tensor, weight_key: QuantKey | None, *, order: GateUpOrder = GateUpOrder.GATE_UP) -> ExpertWeights:
    """Build an :class:`ExpertWeights` from float weights ``w13`` [E, 2I, H] and ``w2`` [E, H, I]."""
    if weight_key is None:
        return ExpertWeights(w13, w2, None, order=order)
    q13, q2 = quantize(w13, weight_key), quantize(w2, weight_key)
    return ExpertWeights(
        q13.data, q2.data, weight_key,
        w13_scale=q13.scale, w2_scale=q2.scale,
        w13_zero=q13.zero, w2_zero=q2.zero,
        w13_global_scale=q13.global_scale, w2_global_scale=q2.global_scale,
        order=order,
    )
