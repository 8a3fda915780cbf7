"""moe-core in vLLM-compatibility mode makes the seeds' decisions: Hypothesis over scenarios, plus a table."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from moe_core import quant
from moe_core.config import MoEConfig, ParallelConfig
from moe_core.errors import BackendUnsupportedError, InvalidEnvironmentError, NoBackendError, UnknownBackendError
from moe_core.platform import preset
from moe_core.quant import QuantFamily
from moe_core.registry import Registry
from moe_core.resolver import select
from tests.parity.oracles import Scenario, UnquantizedScenario, select_fp8, select_int8, select_nvfp4, select_unquantized
from tests.parity.seed_backends import ORDERS, SPECS, SeedPlugin

SCHEME = {QuantFamily.FP8: quant.scheme("fp8-block"), QuantFamily.NVFP4: quant.scheme("nvfp4"), QuantFamily.INT8: quant.scheme("int8")}
ORACLE = {QuantFamily.FP8: select_fp8, QuantFamily.NVFP4: select_nvfp4, QuantFamily.INT8: select_int8}
PLATFORMS = {"h100": preset("h100"), "b200": preset("b200"), "mi300x": preset("mi300x"), "xpu": preset("xpu")}
BOOL = st.sampled_from([None, "0", "1"])


def moe_core_outcome(family: QuantFamily, s: Scenario):
    reg = Registry(autoload=False, builtin=False, environ={})
    reg.register(SeedPlugin(set(s.supported)), name="seeds")
    env = {"MOE_CORE_COMPAT": "vllm", **dict(s.env)}
    if family is QuantFamily.FP8 and not s.allow_vllm_cutlass:
        env["MOE_CORE_DISABLE"] = "vllm_cutlass@fp8,batched_vllm_cutlass@fp8"  # the seed's allow_vllm_cutlass=False
    cfg = MoEConfig(num_experts=8, top_k=2, hidden_size=128, intermediate_size=64, swiglu_limit=7.0 if s.clamp else None,
                    lora_enabled=s.lora, moe_backend=s.moe_backend, parallel=ParallelConfig(use_batched_activation_format=s.batched))
    sch = SCHEME[family]
    try:
        return ("ok", select(cfg, sch.weight_key, sch.activation_key, platform=PLATFORMS[s.platform], registry=reg, environ=env).name), ""
    except NoBackendError as exc:
        return ("notimpl", None), str(exc)
    except (BackendUnsupportedError, UnknownBackendError, InvalidEnvironmentError) as exc:
        return ("value", None), str(exc)


def check(family: QuantFamily, s: Scenario):
    want = ORACLE[family](s)
    got, message = moe_core_outcome(family, s)
    if want[0] == "ok":
        assert got == want, f"{family.value} {s}: moe-core chose {got}, the seed chooses {want[1]}; {message}"
    else:
        assert got[0] == want[0], f"{family.value} {s}: moe-core gave {got}, the seed raises {want}; {message}"
        assert want[1] in message, f"{family.value} {s}: message lacks {want[1]!r}: {message}"


def runnable(platform: str) -> list[str]:
    kind = PLATFORMS[platform].kind
    return [spec.name for spec in SPECS if kind in spec.devices]


@st.composite
def scenarios(draw, family: QuantFamily):
    platform = draw(st.sampled_from(sorted(PLATFORMS)))
    names = [n for n in runnable(platform) if n in ORDERS[family] or (family is QuantFamily.NVFP4 and n == "flashinfer_b12x")]
    supported = set(draw(st.lists(st.sampled_from(names), unique=True))) if names else set()
    batched = draw(st.booleans())
    lora = family in (QuantFamily.FP8, QuantFamily.INT8) and not batched and draw(st.sampled_from([False, False, True]))
    if lora:
        supported.add("triton")  # the seeds return Triton under LoRA without asking it (docs/vllm-compat.md)
    env = {}
    if family is QuantFamily.FP8:
        for var in ("VLLM_USE_FLASHINFER_MOE_FP8", "VLLM_USE_DEEP_GEMM", "VLLM_MOE_USE_DEEP_GEMM", "VLLM_TEST_FORCE_FP8_MARLIN",
                    "VLLM_ROCM_USE_AITER", "VLLM_ROCM_USE_AITER_MOE"):
            value = draw(BOOL)
            if value is not None:
                env[var] = value
    if family is QuantFamily.NVFP4:
        for var in ("VLLM_USE_FLASHINFER_MOE_FP4", "VLLM_TEST_FORCE_FP8_MARLIN"):
            value = draw(BOOL)
            if value is not None:
                env[var] = value
    if family is not QuantFamily.INT8:
        mode = draw(st.sampled_from([None, "latency", "throughput", "masked_gemm"]))
        if mode is not None:
            env["VLLM_FLASHINFER_MOE_BACKEND"] = mode
    backend = "auto"
    if family is not QuantFamily.FP8 and not lora:  # the fp8 seed does not read moe_backend
        backend = draw(st.sampled_from(["auto", "auto", *ORDERS[family], "flashinfer_b12x", "deepgemm", "no_such_backend"]))
    return Scenario(frozenset(supported), tuple(sorted(env.items())), lora=lora, clamp=draw(st.booleans()), batched=batched,
                    moe_backend=backend, allow_vllm_cutlass=draw(st.booleans()), platform=platform)


SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(s=scenarios(QuantFamily.FP8))
def test_fp8_parity(s):
    check(QuantFamily.FP8, s)


@SETTINGS
@given(s=scenarios(QuantFamily.NVFP4))
def test_nvfp4_parity(s):
    check(QuantFamily.NVFP4, s)


@SETTINGS
@given(s=scenarios(QuantFamily.INT8))
def test_int8_parity(s):
    check(QuantFamily.INT8, s)


ALL_FP8 = frozenset(ORDERS[QuantFamily.FP8])
ALL_NVFP4 = frozenset(ORDERS[QuantFamily.NVFP4]) | {"flashinfer_b12x"}

# Hand-written rows: each pins one rule of one oracle, independently of the restatement above.
TABLE = [
    (QuantFamily.FP8, Scenario(ALL_FP8, platform="mi300x"), ("ok", "aiter")),
    (QuantFamily.FP8, Scenario(ALL_FP8 - {"aiter"}), ("ok", "flashinfer_trtllm")),
    (QuantFamily.FP8, Scenario(ALL_FP8, env=(("VLLM_ROCM_USE_AITER", "0"),), platform="mi300x"), ("ok", "flashinfer_trtllm")),
    (QuantFamily.FP8, Scenario(ALL_FP8, env=(("VLLM_USE_FLASHINFER_MOE_FP8", "0"),), platform="mi300x"), ("ok", "aiter")),
    (QuantFamily.FP8, Scenario(ALL_FP8, env=(("VLLM_ROCM_USE_AITER", "1"),), platform="mi300x"), ("ok", "aiter")),
    (QuantFamily.FP8, Scenario(ALL_FP8 - {"aiter"}, env=(("VLLM_USE_FLASHINFER_MOE_FP8", "0"),)), ("ok", "deepgemm")),
    (QuantFamily.FP8, Scenario(ALL_FP8, env=(("VLLM_USE_FLASHINFER_MOE_FP8", "1"), ("VLLM_FLASHINFER_MOE_BACKEND", "throughput"))), ("ok", "flashinfer_cutlass")),
    (QuantFamily.FP8, Scenario(ALL_FP8, env=(("VLLM_USE_FLASHINFER_MOE_FP8", "1"), ("VLLM_MOE_USE_DEEP_GEMM", "1"))), ("ok", "flashinfer_trtllm")),
    (QuantFamily.FP8, Scenario(ALL_FP8, env=(("VLLM_USE_FLASHINFER_MOE_FP8", "1"), ("VLLM_FLASHINFER_MOE_BACKEND", "masked_gemm"))), ("value", "FlashInfer MaskedGEMM not supported for FP8")),
    (QuantFamily.FP8, Scenario(frozenset({"triton"}), env=(("VLLM_USE_FLASHINFER_MOE_FP8", "1"),)), ("notimpl", "Found VLLM_USE_FLASHINFER_MOE_FP8=1, but no FlashInfer FP8 MoE backend supports the configuration")),
    (QuantFamily.FP8, Scenario(ALL_FP8, env=(("VLLM_MOE_USE_DEEP_GEMM", "1"),)), ("ok", "deepgemm")),
    (QuantFamily.FP8, Scenario(ALL_FP8, env=(("VLLM_MOE_USE_DEEP_GEMM", "1"),), batched=True), ("ok", "batched_deepgemm")),
    (QuantFamily.FP8, Scenario(ALL_FP8 - {"aiter", "flashinfer_trtllm", "flashinfer_cutlass"}, env=(("VLLM_USE_DEEP_GEMM", "0"),)), ("ok", "triton")),
    (QuantFamily.FP8, Scenario(ALL_FP8 - {"aiter", "flashinfer_trtllm", "flashinfer_cutlass"}, env=(("VLLM_USE_DEEP_GEMM", "0"),), allow_vllm_cutlass=True), ("ok", "vllm_cutlass")),
    (QuantFamily.FP8, Scenario(ALL_FP8, env=(("VLLM_TEST_FORCE_FP8_MARLIN", "1"),)), ("ok", "marlin")),
    (QuantFamily.FP8, Scenario(ALL_FP8 - {"marlin"}, env=(("VLLM_TEST_FORCE_FP8_MARLIN", "1"),)), ("value", "does not support")),
    (QuantFamily.FP8, Scenario(ALL_FP8, env=(("VLLM_USE_DEEP_GEMM", "1"),), lora=True), ("ok", "triton")),
    (QuantFamily.FP8, Scenario(frozenset()), ("notimpl", "No MoE backend supports the deployment configuration")),
    (QuantFamily.NVFP4, Scenario(ALL_NVFP4), ("ok", "flashinfer_trtllm")),
    (QuantFamily.NVFP4, Scenario(ALL_NVFP4 - {"flashinfer_trtllm"}), ("ok", "flashinfer_cutedsl")),
    (QuantFamily.NVFP4, Scenario(ALL_NVFP4 - {"flashinfer_trtllm"}, batched=True), ("ok", "flashinfer_cutedsl_batched")),
    (QuantFamily.NVFP4, Scenario(ALL_NVFP4 - {"flashinfer_trtllm"}, clamp=True), ("notimpl", "No MoE backend supports the deployment configuration")),
    (QuantFamily.NVFP4, Scenario(ALL_NVFP4, moe_backend="flashinfer_b12x"), ("ok", "flashinfer_b12x")),
    (QuantFamily.NVFP4, Scenario(frozenset({"flashinfer_b12x", "emulation"})), ("ok", "emulation")),
    (QuantFamily.NVFP4, Scenario(ALL_NVFP4, moe_backend="flashinfer_cutedsl", batched=True), ("ok", "flashinfer_cutedsl_batched")),
    (QuantFamily.NVFP4, Scenario(ALL_NVFP4, moe_backend="marlin", clamp=True), ("value", "does not apply the SwiGLU clamp")),
    (QuantFamily.NVFP4, Scenario(ALL_NVFP4, env=(("VLLM_USE_FLASHINFER_MOE_FP4", "0"),)), ("ok", "vllm_cutlass")),
    (QuantFamily.NVFP4, Scenario(ALL_NVFP4, env=(("VLLM_USE_FLASHINFER_MOE_FP4", "1"), ("VLLM_FLASHINFER_MOE_BACKEND", "masked_gemm"))), ("ok", "flashinfer_cutedsl")),
    (QuantFamily.NVFP4, Scenario(ALL_NVFP4, env=(("VLLM_USE_FLASHINFER_MOE_FP4", "1"), ("VLLM_FLASHINFER_MOE_BACKEND", "throughput")), clamp=True), ("value", "does not apply the SwiGLU clamp")),
    (QuantFamily.NVFP4, Scenario(frozenset({"marlin"}), env=(("VLLM_USE_FLASHINFER_MOE_FP4", "1"),)), ("notimpl", "Found VLLM_USE_FLASHINFER_MOE_FP4=1, but no FlashInfer NVFP4 MoE backend supports the configuration")),
    (QuantFamily.NVFP4, Scenario(ALL_NVFP4, env=(("VLLM_TEST_FORCE_FP8_MARLIN", "1"),)), ("ok", "marlin")),
    (QuantFamily.INT8, Scenario(frozenset({"triton"})), ("ok", "triton")),
    (QuantFamily.INT8, Scenario(frozenset({"triton"}), batched=True), ("notimpl", "No MoE backend supports the deployment configuration")),
    (QuantFamily.INT8, Scenario(frozenset(), moe_backend="triton"), ("value", "does not support")),
    (QuantFamily.INT8, Scenario(frozenset({"triton"}), moe_backend="deepgemm"), ("value", "deepgemm")),
    (QuantFamily.INT8, Scenario(frozenset({"triton"}), lora=True), ("ok", "triton")),
]


@pytest.mark.parametrize("family,scenario,want", TABLE, ids=[f"{f.value}-{i}" for i, (f, _, _) in enumerate(TABLE)])
def test_table(family, scenario, want):
    assert ORACLE[family](scenario) == want  # the restated oracle agrees with the hand-written row
    check(family, scenario)


UNQ_PLATFORMS = {"h100": preset("h100"), "a100": preset("a100"), "mi300x": preset("mi300x"), "xpu": preset("xpu"), "cpu": preset("cpu")}


@st.composite
def unquantized_scenarios(draw):
    platform = draw(st.sampled_from(sorted(UNQ_PLATFORMS)))
    env = {}
    for var in ("VLLM_USE_FLASHINFER_MOE_FP16", "VLLM_ROCM_USE_AITER", "VLLM_ROCM_USE_AITER_MOE"):
        value = draw(BOOL)
        if value is not None:
            env[var] = value
    mode = draw(st.sampled_from([None, "latency", "throughput"]))
    if mode is not None:
        env["VLLM_FLASHINFER_MOE_BACKEND"] = mode
    names = ["auto", "auto", "flashinfer_trtllm", "flashinfer_cutlass", "aiter", "deepgemm", "marlin"]
    if platform in ("h100", "a100", "mi300x"):  # D4: the seed returns an explicitly requested Triton on any platform
        names.append("triton")
    return UnquantizedScenario(platform, *(draw(st.booleans()) for _ in range(5)), env=tuple(sorted(env.items())), moe_backend=draw(st.sampled_from(names)))


def unquantized_outcome(s: UnquantizedScenario):
    reg = Registry(autoload=False, builtin=False, environ={})
    reg.register(SeedPlugin(set(s.supported())), name="seeds")
    cfg = MoEConfig(num_experts=8, top_k=2, hidden_size=128, intermediate_size=64, moe_backend=s.moe_backend,
                    parallel=ParallelConfig(ep_size=2 if s.use_ep else 1, dp_size=2 if s.use_dp else 1))
    try:
        return ("ok", select(cfg, platform=UNQ_PLATFORMS[s.platform], registry=reg, environ={"MOE_CORE_COMPAT": "vllm", **dict(s.env)}).name), ""
    except (BackendUnsupportedError, UnknownBackendError, InvalidEnvironmentError) as exc:
        return ("value", None), str(exc)


@SETTINGS
@given(s=unquantized_scenarios())
def test_unquantized_parity(s):
    want = select_unquantized(s)
    got, message = unquantized_outcome(s)
    if want[0] == "ok":
        assert got == want, f"{s}: moe-core {got}, seed {want}; {message}"
    else:
        assert got[0] == "value" and want[1] in message, f"{s}: moe-core {got}, seed {want}; {message}"


UNQ_TABLE = [
    (UnquantizedScenario("h100", True, True, True, True, False), ("ok", "triton")),
    (UnquantizedScenario("h100", True, True, True, True, False, env=(("VLLM_USE_FLASHINFER_MOE_FP16", "1"),)), ("ok", "flashinfer_trtllm")),
    (UnquantizedScenario("h100", True, True, True, True, False, env=(("VLLM_FLASHINFER_MOE_BACKEND", "throughput"), ("VLLM_USE_FLASHINFER_MOE_FP16", "1"))), ("ok", "flashinfer_cutlass")),
    (UnquantizedScenario("h100", True, True, True, True, True, env=(("VLLM_FLASHINFER_MOE_BACKEND", "throughput"), ("VLLM_USE_FLASHINFER_MOE_FP16", "1"))), ("ok", "triton")),
    (UnquantizedScenario("a100", True, False, True, True, False, env=(("VLLM_USE_FLASHINFER_MOE_FP16", "1"),)), ("ok", "triton")),
    (UnquantizedScenario("mi300x", False, False, False, False, False), ("ok", "triton")),
    (UnquantizedScenario("mi300x", False, False, False, False, False, env=(("VLLM_ROCM_USE_AITER", "1"),)), ("ok", "aiter")),
    (UnquantizedScenario("mi300x", False, False, False, False, False, env=(("VLLM_ROCM_USE_AITER", "1"), ("VLLM_ROCM_USE_AITER_MOE", "0"))), ("ok", "triton")),
    (UnquantizedScenario("mi300x", False, False, False, False, False, moe_backend="aiter"), ("value", "does not support")),
    (UnquantizedScenario("xpu", False, False, False, False, False), ("ok", "xpu")),
    (UnquantizedScenario("cpu", False, False, False, False, False), ("ok", "cpu_native")),
    (UnquantizedScenario("h100", True, True, False, False, False, moe_backend="flashinfer_trtllm"), ("ok", "flashinfer_trtllm")),
    (UnquantizedScenario("h100", True, True, True, False, False, moe_backend="flashinfer_cutlass"), ("value", "does not support")),
]


@pytest.mark.parametrize("scenario,want", UNQ_TABLE, ids=[f"unquantized-{i}" for i in range(len(UNQ_TABLE))])
def test_unquantized_table(scenario, want):
    assert select_unquantized(scenario) == want
    got, message = unquantized_outcome(scenario)
    assert got[0] == want[0] and (want[0] != "ok" or got == want) and (want[0] == "ok" or want[1] in message), message
