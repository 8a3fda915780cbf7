"""Validation and messages of the core vocabulary: quant keys, schemes, configs, platforms, specs, Support."""

import pytest
import torch

from moe_core import quant
from moe_core.config import Activation, ActivationFormat, MoEConfig, ParallelConfig
from moe_core.errors import InvalidConfigError
from moe_core.platform import DeviceKind, Platform, preset
from moe_core.quant import GroupShape, QuantDtype, QuantFamily, QuantKey
from moe_core.spec import BackendSpec, SupportQuery
from moe_core.support import Support
from moe_core.testing.fakes import FakeKernel


def cfg(**kw):
    base = dict(num_experts=8, top_k=2, hidden_size=128, intermediate_size=64)
    base.update(kw)
    return MoEConfig(**base)


class TestQuantKey:
    def test_keys_are_frozen_and_hashable(self):
        assert quant.kFp8StaticChannelSym == QuantKey(QuantDtype.FP8_E4M3, GroupShape(1, -1), static=True)
        assert len({quant.kFp8StaticChannelSym, QuantKey(QuantDtype.FP8_E4M3, GroupShape(1, -1), static=True)}) == 1
        with pytest.raises(AttributeError):
            quant.kFp8StaticChannelSym.static = False

    @pytest.mark.parametrize("rows,cols", [(0, 1), (1, -2), (True, 1), (1.5, 1)])
    def test_group_shape_rejects_bad_extents(self, rows, cols):
        with pytest.raises(InvalidConfigError, match="GroupShape"):
            GroupShape(rows, cols)

    def test_asymmetric_float_is_rejected(self):
        with pytest.raises(InvalidConfigError, match="asymmetric"):
            QuantKey(QuantDtype.FP8_E4M3, GroupShape(1, -1), static=True, symmetric=False)

    def test_fp4_needs_block_scales(self):
        with pytest.raises(InvalidConfigError, match="fp4 keys need"):
            QuantKey(QuantDtype.FP4_E2M1, GroupShape(1, 16), static=True)

    def test_global_scale_only_with_e4m3_scales(self):
        with pytest.raises(InvalidConfigError, match="global scale"):
            QuantKey(QuantDtype.INT8, GroupShape(1, 128), static=True, global_scale=True)

    def test_seeds_int8_constants(self):
        assert quant.kInt8StaticChannelSym.dtype is QuantDtype.INT8 and quant.kInt8StaticChannelSym.static
        assert quant.kInt8DynamicTokenSym.group == GroupShape(1, -1) and not quant.kInt8DynamicTokenSym.static

    def test_str_is_readable(self):
        assert str(quant.kFp8Static128BlockSym) == "fp8_e4m3[128x128 static sym fp32]"
        assert str(quant.kNvfp4Static) == "fp4_e2m1[1x16 static sym fp8_e4m3+global]"


class TestSchemes:
    @pytest.mark.parametrize(
        "name,family",
        [("unquantized", QuantFamily.UNQUANTIZED), ("fp8-block", QuantFamily.FP8), ("fp8-channel", QuantFamily.FP8),
         ("int8", QuantFamily.INT8), ("nvfp4", QuantFamily.NVFP4), ("mxfp4", QuantFamily.MXFP4),
         ("w4a16", QuantFamily.WEIGHT_ONLY), ("w8a16-zp", QuantFamily.WEIGHT_ONLY)],
    )
    def test_families(self, name, family):
        assert quant.scheme(name).family is family

    def test_names_are_unique_and_keys_are_unique(self):
        assert len({s.name for s in quant.SCHEMES}) == len(quant.SCHEMES)
        assert len({s.keys for s in quant.SCHEMES}) == len(quant.SCHEMES)

    def test_unknown_scheme_lists_valid_names(self):
        with pytest.raises(InvalidConfigError, match="valid schemes: unquantized, fp8-tensor"):
            quant.scheme("fp9")

    def test_activation_only_quantization_is_rejected(self):
        with pytest.raises(InvalidConfigError, match="unquantized weights"):
            quant.quant_family(None, quant.kFp8DynamicTokenSym)

    def test_describe_non_canonical_pair(self):
        text = quant.describe_keys(quant.kFp8StaticChannelSym, quant.kFp8StaticTensorSym)
        assert "fp8_e4m3[1xall static" in text and "a=fp8_e4m3[allxall static" in text

    def test_family_parse_lists_valid(self):
        assert QuantFamily.parse(" FP8 ") is QuantFamily.FP8
        with pytest.raises(InvalidConfigError, match="valid families: unquantized, fp8"):
            QuantFamily.parse("fp16")


class TestMoEConfig:
    def test_valid_and_hashable(self):
        c = cfg(activation="gelu", moe_backend=" Triton ")
        assert c.activation is Activation.GELU and c.moe_backend == "triton"
        assert hash(c) == hash(cfg(activation="gelu", moe_backend="triton"))
        assert c.activation_format is ActivationFormat.STANDARD

    @pytest.mark.parametrize(
        "kw,msg",
        [
            ({"num_experts": 0}, "num_experts must be a positive int"),
            ({"top_k": 9}, "top_k=9 exceeds num_experts=8"),
            ({"hidden_size": 12.0}, "hidden_size must be a positive int"),
            ({"dtype": torch.int8}, "dtype must be one of float32, float16, bfloat16"),
            ({"activation": "relu"}, "valid: silu, gelu"),
            ({"swiglu_limit": -1.0}, "swiglu_limit must be finite and > 0"),
            ({"swiglu_limit": float("inf")}, "swiglu_limit must be finite"),
            ({"swiglu_limit": "7"}, "swiglu_limit must be a number"),
            ({"lora_enabled": 1}, "lora_enabled must be a bool"),
            ({"moe_backend": ""}, "moe_backend must be 'auto' or a backend name"),
            ({"parallel": ParallelConfig(ep_size=3)}, "not divisible by ep_size=3"),
            ({"parallel": "ep"}, "parallel must be a ParallelConfig"),
        ],
    )
    def test_errors_name_the_field(self, kw, msg):
        with pytest.raises(InvalidConfigError, match=msg):
            cfg(**kw)

    def test_parallel(self):
        p = ParallelConfig(ep_size=2, dp_size=2, use_batched_activation_format=True)
        assert p.use_ep and p.use_dp and p.activation_format is ActivationFormat.BATCHED_EXPERTS
        assert cfg(parallel=ParallelConfig(ep_size=4)).local_num_experts == 2
        with pytest.raises(InvalidConfigError, match="tp_size"):
            ParallelConfig(tp_size=0)


class TestPlatform:
    def test_presets(self):
        h100 = preset("H100")
        assert h100.is_cuda() and h100.has_capability(9, 0) and not h100.has_capability(10, 0)
        assert preset("mi300x").is_rocm() and preset("cpu").is_cpu()
        assert "simulated" in h100.describe() and "sm_90" in h100.describe()
        with pytest.raises(InvalidConfigError, match="valid presets: h100"):
            preset("tpu")

    def test_validation(self):
        with pytest.raises(InvalidConfigError, match="capability"):
            Platform(DeviceKind.CUDA, (9,))
        with pytest.raises(InvalidConfigError, match="DeviceKind"):
            Platform("cuda")

    def test_detect_on_this_machine(self):
        from moe_core.platform import detect

        plat = detect()
        xpu = getattr(torch, "xpu", None)
        if torch.cuda.is_available():
            want = DeviceKind.ROCM if getattr(torch.version, "hip", None) else DeviceKind.CUDA
            assert plat.capability == tuple(torch.cuda.get_device_capability())
        else:
            want = DeviceKind.XPU if xpu is not None and xpu.is_available() else DeviceKind.CPU
        assert plat.kind is want
        assert not plat.simulated


class TestSupport:
    def test_no_needs_reason(self):
        with pytest.raises(ValueError, match="needs at least one reason"):
            Support(False)
        with pytest.raises(TypeError):
            Support("yes")

    def test_and_keeps_reasons(self):
        combined = Support.yes("note") & Support.no("a") & Support.no("b")
        assert not combined.ok and combined.reasons == ("a", "b")
        assert (Support.yes("x") & Support.yes("y")).reasons == ("x", "y")
        assert Support.from_reasons([]).ok and not Support.from_reasons(["r"]).ok


def spec(**kw):
    base = dict(name="acme", family="acme", priority=10, schemes=[quant.scheme("unquantized")], kernel=FakeKernel)
    base.update(kw)
    return BackendSpec(**base)


class TestBackendSpec:
    @pytest.mark.parametrize(
        "kw,msg",
        [
            ({"name": "Acme"}, "name must match"),
            ({"name": "auto"}, "reserved"),
            ({"family": "a-b"}, "family must match"),
            ({"priority": 1.5}, "priority must be an int"),
            ({"schemes": []}, "declares no quant scheme"),
            ({"schemes": ["fp8"]}, "schemes entries must be"),
            ({"formats": frozenset()}, "formats must be a non-empty"),
            ({"devices": {"cuda"}}, "devices must be a non-empty set of DeviceKind"),
            ({"kernel": "no_colon"}, "kernel must be a class or 'module:Class'"),
            ({"family_priorities": {"fp16": 3}}, "unknown quant family"),
            ({"batched_variant": "Bad Name"}, "batched_variant"),
        ],
    )
    def test_validation(self, kw, msg):
        with pytest.raises(InvalidConfigError, match=msg):
            spec(**kw)

    def test_family_priorities_and_lazy_kernel(self):
        s = spec(family_priorities={"fp8": 50}, kernel="moe_core.reference.kernel:ReferenceKernel")
        assert s.priority_for(QuantFamily.FP8) == 50 and s.priority_for(QuantFamily.INT8) == 10
        assert s.load_kernel().__name__ == "ReferenceKernel"

    def test_declared_reasons(self):
        s = spec()
        q = SupportQuery(cfg(lora_enabled=True, swiglu_limit=7.0, parallel=ParallelConfig(ep_size=2, use_batched_activation_format=True)),
                         quant.kFp8StaticChannelSym, quant.kFp8DynamicTokenSym, preset("cpu"))
        reasons = " | ".join(dataclass_reasons := s.declared_reasons(q))
        assert "does not implement the fp8-channel scheme" in reasons
        assert "LoRA" in reasons and "SwiGLU clamp" in reasons and "batched_experts" in reasons
        assert "runs on cuda, not cpu" in reasons
        assert len(dataclass_reasons) == 5
        s2 = spec(requires={"flashinfer"}, supports_expert_map=False, devices={DeviceKind.CPU})
        q2 = SupportQuery(cfg(parallel=ParallelConfig(ep_size=2)), None, None, preset("cpu"))
        assert s2.declared_reasons(q2) == [
            "package(s) flashinfer not importable",
            "expert parallelism (ep_size=2) needs an expert map and this backend has none",
        ]
