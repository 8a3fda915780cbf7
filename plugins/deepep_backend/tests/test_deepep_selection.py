"""Selection with the deepep plugin registered beside the built-ins: the automatic pair is the one chosen
without it (its dispatchers are never validated, so never preferred without a measured ranking), and a
request for one of them is honoured or refused with reasons."""

from __future__ import annotations

import dataclasses

import torch

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from moe_core import resolver
from moe_core.errors import BackendUnsupportedError, NoBackendError
from moe_core.pair import select_pair
from moe_core.registry import Registry
from moe_core.testing.strategies import configs, platforms, schemes
from moe_core_deepep import plugin


def _pair(reg, cfg, sch, plat):
    """(dispatcher, experts) of the pair, or the refusal raised."""
    resolver.clear_cache()
    try:
        got = select_pair(cfg, sch.weight_key, sch.activation_key, platform=plat, registry=reg, environ={})
    except (NoBackendError, BackendUnsupportedError) as exc:
        return exc
    return got.dispatcher.name, got.experts.name


def _expert_parallel(cfg, ep: int, bf16: bool):
    """``cfg`` over ``ep`` ranks; in bfloat16 when ``bf16`` (the dtype DeepEP moves: most requests can succeed)."""
    dtype = torch.bfloat16 if bf16 else cfg.dtype
    return dataclasses.replace(cfg, dtype=dtype, num_experts=ep * cfg.num_experts, parallel=dataclasses.replace(cfg.parallel, ep_size=ep))


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(configs(lora=False), schemes(), platforms(), st.sampled_from([2, 4]), st.sampled_from(sorted(plugin._NAMES)), st.booleans())
def test_registering_deepep_changes_no_automatic_pair_and_a_request_is_honoured_or_refused(cfg, sch, plat, ep, name, bf16):
    cfg = _expert_parallel(cfg, ep, bf16)
    without = Registry(autoload=False, environ={})
    with_deepep = Registry(autoload=False, environ={})
    with_deepep.register(plugin, name="deepep")
    auto_with, auto_without = _pair(with_deepep, cfg, sch, plat), _pair(without, cfg, sch, plat)
    assert type(auto_with) is type(auto_without) and (isinstance(auto_with, Exception) or auto_with == auto_without)

    requested = dataclasses.replace(cfg, parallel=dataclasses.replace(cfg.parallel, dispatch_backend=name))
    got = _pair(with_deepep, requested, sch, plat)
    if isinstance(got, BackendUnsupportedError):
        assert name in str(got), got
    elif not isinstance(got, NoBackendError):
        event(f"{name} selected")
        assert got[0] == name
