"""Quantization vocabulary: what a tensor is quantized to, and the canonical schemes.

A :class:`QuantKey` describes one tensor (weights or activations): the element dtype, how its
scales are laid out (:class:`GroupShape`), whether scales are static (computed offline) or
dynamic (computed at run time), the scale dtype, and whether the encoding is symmetric.
``None`` stands for "unquantized" everywhere a key is accepted.

A :class:`QuantScheme` pairs a weight key with an activation key under a short, user-facing name
(``"fp8-block"``, ``"int8"``, ...). Schemes are what the CLI, the benchmark and the backend specs
talk about; :class:`QuantFamily` groups them the way the seeds' per-family oracles do.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from moe_core.errors import InvalidConfigError


class QuantDtype(enum.Enum):
    """Element type of a quantized tensor."""

    FP8_E4M3 = "fp8_e4m3"
    INT8 = "int8"
    INT4 = "int4"
    FP4_E2M1 = "fp4_e2m1"


class ScaleDtype(enum.Enum):
    """Storage type of the scales."""

    FP32 = "fp32"
    FP8_E4M3 = "fp8_e4m3"  # nvfp4 block scales
    E8M0 = "e8m0"  # mxfp4 power-of-two scales, stored as a biased uint8 exponent


@dataclass(frozen=True, order=True)
class GroupShape:
    """How many (rows, cols) of a 2-D tensor share one scale; ``-1`` means "the whole extent".

    For weights, rows are output channels (N) and cols the reduction dimension (K); for
    activations, rows are tokens and cols the hidden dimension. So ``(1, -1)`` is per-channel for
    a weight and per-token for an activation, ``(-1, -1)`` is per-tensor, ``(128, 128)`` a 2-D
    block and ``(1, 128)`` a group of 128 along K.
    """

    rows: int
    cols: int

    def __post_init__(self) -> None:
        for name in ("rows", "cols"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or (value < 1 and value != -1):
                raise InvalidConfigError(f"GroupShape.{name} must be a positive int or -1 (whole extent), got {value!r}")

    @property
    def is_per_tensor(self) -> bool:
        return self.rows == -1 and self.cols == -1

    def __str__(self) -> str:
        def part(v: int) -> str:
            return "all" if v == -1 else str(v)

        return f"{part(self.rows)}x{part(self.cols)}"


PER_TENSOR = GroupShape(-1, -1)
PER_ROW = GroupShape(1, -1)  # per-token for activations, per-channel for weights
BLOCK_128 = GroupShape(128, 128)
GROUP_1x128 = GroupShape(1, 128)
GROUP_1x16 = GroupShape(1, 16)
GROUP_1x32 = GroupShape(1, 32)


@dataclass(frozen=True)
class QuantKey:
    """Frozen, hashable description of how one tensor is quantized.

    Attributes:
        dtype: element type.
        group: scale layout (see :class:`GroupShape`).
        static: True when scales are fixed ahead of time, False when computed at run time.
        symmetric: False when an integer zero point accompanies each scale.
        scale_dtype: how scales are stored.
        global_scale: True when one fp32 scale per tensor (per expert for weights) multiplies the
            block scales, as nvfp4 does.
    """

    dtype: QuantDtype
    group: GroupShape
    static: bool
    symmetric: bool = True
    scale_dtype: ScaleDtype = ScaleDtype.FP32
    global_scale: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.dtype, QuantDtype):
            raise InvalidConfigError(f"QuantKey.dtype must be a QuantDtype, got {self.dtype!r}")
        if not isinstance(self.group, GroupShape):
            raise InvalidConfigError(f"QuantKey.group must be a GroupShape, got {self.group!r}")
        if not self.symmetric and self.dtype not in (QuantDtype.INT4, QuantDtype.INT8):
            raise InvalidConfigError(f"asymmetric (zero-point) quantization is only defined for integer dtypes, not {self.dtype.value}")
        if self.dtype is QuantDtype.FP4_E2M1 and self.scale_dtype is ScaleDtype.FP32:
            raise InvalidConfigError("fp4 keys need fp8_e4m3 (nvfp4) or e8m0 (mxfp4) block scales")
        if self.global_scale and self.scale_dtype is not ScaleDtype.FP8_E4M3:
            raise InvalidConfigError("a global scale is only used with fp8_e4m3 block scales (nvfp4)")

    def __str__(self) -> str:
        kind = "static" if self.static else "dynamic"
        sym = "sym" if self.symmetric else "asym"
        extra = "+global" if self.global_scale else ""
        return f"{self.dtype.value}[{self.group} {kind} {sym} {self.scale_dtype.value}{extra}]"


# Canonical keys, named as in the seeds (vLLM's quant_utils) where a name exists there.
kFp8StaticTensorSym = QuantKey(QuantDtype.FP8_E4M3, PER_TENSOR, static=True)
kFp8DynamicTensorSym = QuantKey(QuantDtype.FP8_E4M3, PER_TENSOR, static=False)
kFp8DynamicTokenSym = QuantKey(QuantDtype.FP8_E4M3, PER_ROW, static=False)
kFp8StaticChannelSym = QuantKey(QuantDtype.FP8_E4M3, PER_ROW, static=True)
kFp8Static128BlockSym = QuantKey(QuantDtype.FP8_E4M3, BLOCK_128, static=True)
kFp8Dynamic128Sym = QuantKey(QuantDtype.FP8_E4M3, GROUP_1x128, static=False)
kInt8StaticChannelSym = QuantKey(QuantDtype.INT8, PER_ROW, static=True)
kInt8DynamicTokenSym = QuantKey(QuantDtype.INT8, PER_ROW, static=False)
kNvfp4Static = QuantKey(QuantDtype.FP4_E2M1, GROUP_1x16, static=True, scale_dtype=ScaleDtype.FP8_E4M3, global_scale=True)
kNvfp4Dynamic = QuantKey(QuantDtype.FP4_E2M1, GROUP_1x16, static=False, scale_dtype=ScaleDtype.FP8_E4M3, global_scale=True)
kMxfp4Static = QuantKey(QuantDtype.FP4_E2M1, GROUP_1x32, static=True, scale_dtype=ScaleDtype.E8M0)
kInt4StaticGroup128Sym = QuantKey(QuantDtype.INT4, GROUP_1x128, static=True)
kInt4StaticGroup128Asym = QuantKey(QuantDtype.INT4, GROUP_1x128, static=True, symmetric=False)
kInt8StaticGroup128Sym = QuantKey(QuantDtype.INT8, GROUP_1x128, static=True)
kInt8StaticGroup128Asym = QuantKey(QuantDtype.INT8, GROUP_1x128, static=True, symmetric=False)


class QuantFamily(enum.Enum):
    """The quantization families of the seeds' oracles (one ``select_*_moe_backend`` each)."""

    UNQUANTIZED = "unquantized"
    FP8 = "fp8"
    INT8 = "int8"
    NVFP4 = "nvfp4"
    MXFP4 = "mxfp4"
    WEIGHT_ONLY = "weight_only"

    @classmethod
    def parse(cls, text: str) -> "QuantFamily":
        try:
            return cls(text.strip().lower())
        except ValueError:
            valid = ", ".join(f.value for f in cls)
            raise InvalidConfigError(f"unknown quant family {text!r}; valid families: {valid}") from None


def quant_family(weight_key: QuantKey | None, activation_key: QuantKey | None) -> QuantFamily:
    """The family a (weight, activation) pair belongs to, derived from the weight key.

    Weight-only schemes (integer weights with unquantized activations) form their own family;
    integer weights with integer activations are INT8 w8a8.
    """
    if weight_key is None:
        if activation_key is not None:
            raise InvalidConfigError(f"quantized activations ({activation_key}) with unquantized weights are not a MoE scheme")
        return QuantFamily.UNQUANTIZED
    if weight_key.dtype is QuantDtype.FP8_E4M3:
        return QuantFamily.FP8
    if weight_key.dtype is QuantDtype.FP4_E2M1:
        return QuantFamily.NVFP4 if weight_key.scale_dtype is ScaleDtype.FP8_E4M3 else QuantFamily.MXFP4
    if activation_key is None:
        return QuantFamily.WEIGHT_ONLY
    return QuantFamily.INT8


@dataclass(frozen=True)
class QuantScheme:
    """A named (weight key, activation key) pair, the unit backends declare support for."""

    name: str
    weight_key: QuantKey | None
    activation_key: QuantKey | None
    description: str

    @property
    def family(self) -> QuantFamily:
        return quant_family(self.weight_key, self.activation_key)

    @property
    def keys(self) -> tuple[QuantKey | None, QuantKey | None]:
        return (self.weight_key, self.activation_key)


SCHEMES: tuple[QuantScheme, ...] = (
    QuantScheme("unquantized", None, None, "16/32-bit weights and activations"),
    QuantScheme("fp8-tensor", kFp8StaticTensorSym, kFp8StaticTensorSym, "fp8 w8a8, per-tensor weight and static per-tensor activation scales"),
    QuantScheme("fp8-tensor-dyn", kFp8StaticTensorSym, kFp8DynamicTensorSym, "fp8 w8a8, per-tensor weight scales, dynamic per-tensor activation scales"),
    QuantScheme("fp8-tensor-token", kFp8StaticTensorSym, kFp8DynamicTokenSym, "fp8 w8a8, per-tensor weight scales, dynamic per-token activation scales"),
    QuantScheme("fp8-channel", kFp8StaticChannelSym, kFp8DynamicTokenSym, "fp8 w8a8, per-channel weights, dynamic per-token activations"),
    QuantScheme("fp8-block", kFp8Static128BlockSym, kFp8Dynamic128Sym, "fp8 w8a8, 128x128 weight blocks, dynamic 1x128 activation groups (DeepSeek-V3)"),
    QuantScheme("fp8-w8a16", kFp8StaticChannelSym, None, "fp8 weight-only: per-channel fp8 weights, 16-bit activations (GPUs without fp8 MMA)"),
    QuantScheme("fp8-block-w8a16", kFp8Static128BlockSym, None, "fp8 weight-only: 128x128 fp8 weight blocks, 16-bit activations"),
    QuantScheme("int8", kInt8StaticChannelSym, kInt8DynamicTokenSym, "int8 w8a8, per-channel weights, dynamic per-token activations"),
    QuantScheme("nvfp4", kNvfp4Static, kNvfp4Dynamic, "nvfp4 w4a4: e2m1 values, e4m3 scales per 16, fp32 global scale"),
    QuantScheme("nvfp4-w4a16", kNvfp4Static, None, "nvfp4 weights, 16-bit activations"),
    QuantScheme("mxfp4", kMxfp4Static, None, "mxfp4 weights (e2m1, e8m0 scales per 32), 16-bit activations"),
    QuantScheme("w4a16", kInt4StaticGroup128Sym, None, "int4 weight-only, symmetric, scales per 128"),
    QuantScheme("w4a16-zp", kInt4StaticGroup128Asym, None, "int4 weight-only with zero points, scales per 128"),
    QuantScheme("w8a16", kInt8StaticGroup128Sym, None, "int8 weight-only, symmetric, scales per 128"),
    QuantScheme("w8a16-zp", kInt8StaticGroup128Asym, None, "int8 weight-only with zero points, scales per 128"),
)

_SCHEMES_BY_NAME = {s.name: s for s in SCHEMES}
_SCHEMES_BY_KEYS = {s.keys: s for s in SCHEMES}


def scheme(name: str) -> QuantScheme:
    """Look up a canonical scheme by name; the error lists every valid name."""
    try:
        return _SCHEMES_BY_NAME[name]
    except KeyError:
        raise InvalidConfigError(f"unknown quant scheme {name!r}; valid schemes: {', '.join(_SCHEMES_BY_NAME)}") from None


def scheme_for_keys(weight_key: QuantKey | None, activation_key: QuantKey | None) -> QuantScheme | None:
    """The canonical scheme with exactly these keys, or None for a non-canonical pair."""
    return _SCHEMES_BY_KEYS.get((weight_key, activation_key))


def describe_keys(weight_key: QuantKey | None, activation_key: QuantKey | None) -> str:
    """Short human-readable name of a key pair, for messages and tables."""
    known = scheme_for_keys(weight_key, activation_key)
    if known is not None:
        return known.name
    return f"w={weight_key or 'unquantized'} a={activation_key or 'unquantized'}"
