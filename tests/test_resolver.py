"""Resolver examples: environment, precedence, request mapping, manual-only backends, errors, logging, platforms."""

import dataclasses
import logging

import pytest

from moe_core import quant
from moe_core.config import ActivationFormat, MoEConfig, ParallelConfig
from moe_core.errors import BackendUnsupportedError, InvalidEnvironmentError, NoBackendError, UnknownBackendError
from moe_core.platform import DeviceKind, preset
from moe_core.registry import Registry
from moe_core.resolver import select
from moe_core.selection import CandidateStatus, SelectionSource
from moe_core.spec import BackendSpec
from moe_core.testing.fakes import FakeBackend, FakeKernel, FakePlugin

CFG = MoEConfig(num_experts=8, top_k=2, hidden_size=128, intermediate_size=64)
FP8 = quant.scheme("fp8-block")
ALL_DEVICES = frozenset(DeviceKind)


def spec(name, priority, family="acme", schemes=(FP8, quant.scheme("unquantized")), devices=ALL_DEVICES, **kw):
    return BackendSpec(name=name, family=family, priority=priority, schemes=schemes, kernel=FakeKernel, devices=devices, **kw)


@pytest.fixture
def reg():
    """gpu_fast (cuda, sm90+), rocm_fast (rocm), portable (any device, LoRA, clamp), both formats via batched sibling."""
    r = Registry(autoload=False, environ={})
    r.register(FakePlugin([
        FakeBackend(spec("gpu_fast", 900, family="vendor", devices={DeviceKind.CUDA}, batched_variant="gpu_fast_batched"), min_capability=(9, 0)),
        FakeBackend(spec("gpu_fast_batched", 850, family="vendor", devices={DeviceKind.CUDA}, formats={ActivationFormat.BATCHED_EXPERTS}), min_capability=(9, 0)),
        FakeBackend(spec("rocm_fast", 800, family="amd", devices={DeviceKind.ROCM})),
        FakeBackend(spec("portable", 500, supports_lora=True, applies_swiglu_clamp=True, formats=set(ActivationFormat))),
        FakeBackend(spec("opt_in", 2000, auto_select=False)),
    ]), name="fakes")
    return r


def choose(reg, cfg=CFG, scheme=FP8, platform="h100", env=None):
    return select(cfg, scheme.weight_key, scheme.activation_key, platform=preset(platform), registry=reg, environ=env or {})


@pytest.mark.parametrize("platform,want", [("h100", "gpu_fast"), ("b200", "gpu_fast"), ("a100", "portable"), ("mi300x", "rocm_fast"), ("cpu", "portable")])
def test_simulated_platforms(reg, platform, want):
    assert choose(reg, platform=platform).name == want


def test_reference_is_the_last_resort_on_cpu():
    r = Registry(autoload=False, environ={})
    assert choose(r, platform="cpu").name == "reference"


def test_table_explains_every_candidate(reg):
    text = choose(reg, platform="a100").explain()
    assert "needs compute capability 9.0+" in text  # gpu_fast on sm_80
    assert "runs on rocm, not cuda" in text
    assert "manual only" in text and "never auto-selected" in text
    assert "=> portable (by priority)" in text
    assert "scheme=fp8-block" in text and "sm_80" in text
    d = choose(reg, platform="a100").to_dict()
    assert d["backend"] == "portable" and d["source"] == "priority"
    assert [c["name"] for c in d["candidates"]][:2] == ["opt_in", "gpu_fast"]


def test_manual_only_backend_runs_when_requested(reg):
    sel = choose(reg, cfg=dataclasses.replace(CFG, moe_backend="opt_in"))
    assert sel.name == "opt_in" and sel.source is SelectionSource.REQUEST


def test_request_maps_to_batched_variant(reg):
    batched = dataclasses.replace(CFG, moe_backend="gpu_fast", parallel=ParallelConfig(use_batched_activation_format=True))
    assert choose(reg, cfg=batched).name == "gpu_fast_batched"


def test_request_unknown_lists_valid_names(reg):
    with pytest.raises(UnknownBackendError, match="moe_backend='nope' is not a registered MoE backend. Registered backends: gpu_fast, gpu_fast_batched"):
        choose(reg, cfg=dataclasses.replace(CFG, moe_backend="nope"))


def test_request_unsupported_says_why_and_never_substitutes(reg):
    with pytest.raises(BackendUnsupportedError, match="'gpu_fast' .requested by moe_backend. does not support this layer since needs compute capability 9.0") as err:
        choose(reg, cfg=dataclasses.replace(CFG, moe_backend="gpu_fast"), platform="a100")
    assert "portable" in str(err.value)  # the table is part of the message


def test_request_with_clamp_on_a_non_clamp_backend_raises(reg):
    with pytest.raises(BackendUnsupportedError, match="does not apply the SwiGLU clamp"):
        choose(reg, cfg=dataclasses.replace(CFG, moe_backend="gpu_fast", swiglu_limit=7.0))


def test_lora_and_clamp_policies(reg):
    sel = choose(reg, cfg=dataclasses.replace(CFG, lora_enabled=True))
    assert sel.name == "portable"
    assert next(c for c in sel.candidates if c.name == "gpu_fast").status is CandidateStatus.EXCLUDED_POLICY
    assert choose(reg, cfg=dataclasses.replace(CFG, swiglu_limit=7.0)).name == "portable"


def test_nothing_supported_is_not_implemented_with_the_table(reg):
    with pytest.raises(NotImplementedError) as err:
        choose(reg, scheme=quant.scheme("int8"), platform="h100", env={"MOE_CORE_DISABLE": "reference"})
    assert isinstance(err.value, NoBackendError)
    assert "reference" in str(err.value) and "disabled by MOE_CORE_DISABLE" in str(err.value) and "int8" in str(err.value)


class TestEnvironment:
    def test_force_is_a_request(self, reg):
        sel = choose(reg, env={"MOE_CORE_BACKEND": "portable"})
        assert sel.name == "portable" and sel.source is SelectionSource.ENV
        assert all(c.status is not CandidateStatus.RUNNER_UP for c in sel.candidates)  # no silent substitutes

    def test_explicit_request_beats_env_force(self, reg):
        sel = choose(reg, cfg=dataclasses.replace(CFG, moe_backend="gpu_fast"), env={"MOE_CORE_BACKEND": "portable"})
        assert sel.name == "gpu_fast" and sel.source is SelectionSource.REQUEST

    def test_request_is_honoured_even_if_disabled(self, reg):
        sel = choose(reg, cfg=dataclasses.replace(CFG, moe_backend="gpu_fast"), env={"MOE_CORE_DISABLE": "gpu_fast"})
        assert sel.name == "gpu_fast"

    def test_disable_family_and_family_for_one_quant_family(self, reg):
        assert choose(reg, env={"MOE_CORE_DISABLE": "vendor"}).name == "portable"
        assert choose(reg, env={"MOE_CORE_DISABLE": "vendor@fp8"}).name == "portable"
        assert choose(reg, scheme=quant.scheme("unquantized"), env={"MOE_CORE_DISABLE": "vendor@fp8"}).name == "gpu_fast"

    def test_only(self, reg):
        sel = choose(reg, env={"MOE_CORE_ONLY": "reference, portable"})
        assert sel.name == "portable"
        assert "not in MOE_CORE_ONLY=reference,portable" in sel.explain()

    def test_priority_override_reranks(self, reg):
        sel = choose(reg, env={"MOE_CORE_PRIORITY": "portable=5000"})
        assert sel.name == "portable" and "priority from MOE_CORE_PRIORITY" in sel.explain()

    @pytest.mark.parametrize(
        "env,msg",
        [
            ({"MOE_CORE_BACKEND": "cuda_magic"}, r"MOE_CORE_BACKEND='cuda_magic': no registered backend has this name. Valid values: gpu_fast"),
            ({"MOE_CORE_DISABLE": "nvidia"}, r"MOE_CORE_DISABLE='nvidia': matches no registered backend or family. Valid values: acme, amd"),
            ({"MOE_CORE_ONLY": "portable@fp16"}, r"MOE_CORE_ONLY='portable@fp16': unknown quant family 'fp16'"),
            ({"MOE_CORE_DISABLE": "@fp8"}, r"no backend or family name before '@'"),
            ({"MOE_CORE_PRIORITY": "portable:9"}, r"MOE_CORE_PRIORITY='portable:9': entries must be NAME=INTEGER"),
            ({"MOE_CORE_PRIORITY": "ghost=9"}, r"MOE_CORE_PRIORITY='ghost': no registered backend"),
            ({"MOE_CORE_PLUGINS_AUTOLOAD": "maybe"}, r"MOE_CORE_PLUGINS_AUTOLOAD='maybe': not a boolean. Valid values: 1, true"),
        ],
    )
    def test_invalid_values_are_errors_naming_the_variable(self, reg, env, msg):
        with pytest.raises(InvalidEnvironmentError, match=msg):
            choose(reg, env=env)

    def test_env_snapshot_is_part_of_the_cache_key(self, reg):
        assert choose(reg).name == "gpu_fast"
        assert choose(reg, env={"MOE_CORE_DISABLE": "gpu_fast"}).name == "portable"
        assert choose(reg).name == "gpu_fast"


def test_choice_logged_once_at_info_and_rejections_at_debug(reg, caplog):
    from moe_core import resolver

    resolver._logged.clear()
    with caplog.at_level(logging.DEBUG, logger="moe_core"):
        choose(reg, platform="a100")
        resolver.clear_cache()
        choose(reg, platform="a100")
    infos = [r for r in caplog.records if r.levelno == logging.INFO]
    assert len(infos) == 1 and "Using portable MoE backend" in infos[0].getMessage()
    assert "'gpu_fast'" in infos[0].getMessage()
    assert any(r.levelno == logging.DEBUG and "gpu_fast" in r.getMessage() and "capability" in r.getMessage() for r in caplog.records)
