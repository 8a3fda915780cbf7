"""What the resolver tells its user, line by line: candidate notes and statuses, decided-by lines of measured
rankings, the vLLM-compatibility overlay's notes and vetoes, typed errors, logs; and its caches and defaults."""

from __future__ import annotations

import dataclasses
import logging
import os

import pytest

from moe_core import autotune, quant, ranking_sources, resolver
from moe_core.config import ActivationFormat, MoEConfig, ParallelConfig
from moe_core.errors import BackendUnsupportedError, NoBackendError, UnknownBackendError
from moe_core.platform import DeviceKind, preset
from moe_core.quant import QuantFamily
from moe_core.ranking import MeasuredWith, Ranking, RankingEntry, use_ranking
from moe_core.registry import Registry
from moe_core.selection import CandidateStatus, SelectionSource
from moe_core.spec import Validation
from moe_core.testing.fakes import FakeBackend, FakePlugin
from tests.test_resolver import CFG, FP8, spec

UNQUANTIZED = quant.scheme("unquantized")
H100 = preset("h100")
#: This process's machine, for the tests that need one that is not simulated (autotuning, the default platform).
HERE = dataclasses.replace(preset("cpu"), simulated=False)
NOT_ENABLED = "ROCm AITER MoE is not enabled (VLLM_ROCM_USE_AITER=1 and VLLM_ROCM_USE_AITER_MOE=1 enable it)"


def registry(*fakes: FakeBackend) -> Registry:
    reg = Registry(autoload=False, environ={})
    reg.register(FakePlugin(list(fakes)), name="fakes")
    return reg


@pytest.fixture
def reg():
    """gpu_fast (cuda sm90+, batched sibling), rocm_fast, portable (first for unquantized layers), opt_in (manual),
    int8_only (claims no fp8 scheme), and the built-in reference."""
    return registry(
        FakeBackend(spec("gpu_fast", 900, family="vendor", devices={DeviceKind.CUDA}, batched_variant="gpu_fast_batched"), min_capability=(9, 0)),
        FakeBackend(spec("gpu_fast_batched", 850, family="vendor", devices={DeviceKind.CUDA}, formats={ActivationFormat.BATCHED_EXPERTS}),
                    min_capability=(9, 0)),
        FakeBackend(spec("rocm_fast", 800, family="amd", devices={DeviceKind.ROCM})),
        FakeBackend(spec("portable", 500, family_priorities={QuantFamily.UNQUANTIZED: 1000}, formats=set(ActivationFormat))),
        FakeBackend(spec("opt_in", 2000, auto_select=False)),
        FakeBackend(spec("int8_only", 3000, schemes=(quant.scheme("int8"),))),
    )


@pytest.fixture(autouse=True)
def _fresh():
    resolver.clear_cache()
    resolver._logged.clear()
    use_ranking(None)
    autotune.reset()
    yield
    use_ranking(None)
    autotune.reset()
    resolver.clear_cache()


def choose(reg, cfg=CFG, scheme=FP8, platform=H100, env=None, **kw):
    return resolver.select(cfg, scheme.weight_key, scheme.activation_key, platform=platform, registry=reg, environ=env or {}, **kw)


def rows(selection):
    return [(c.name, c.family, c.plugin, c.priority, c.status.value, c.note, c.support.reasons) for c in selection.candidates]


def note(selection, name):
    return next(c.note for c in selection.candidates if c.name == name)


# ---------------------------------------------------------------- the table's lines


def test_every_row_says_where_its_candidate_stands_and_why(reg):
    sel = choose(reg, env={"MOE_CORE_PRIORITY": "portable=5000", "MOE_CORE_DISABLE": "rocm_fast"})
    assert (sel.name, sel.source, sel.decided_by) == ("portable", SelectionSource.PRIORITY, "")
    assert rows(sel) == [  # int8_only claims no fp8 scheme: not a candidate
        ("portable", "acme", "fakes", 5000, "selected", "priority from MOE_CORE_PRIORITY", ()),
        ("opt_in", "acme", "fakes", 2000, "manual only", "never auto-selected; request it by name", ()),
        ("gpu_fast", "vendor", "fakes", 900, "runner-up", "", ()),
        ("gpu_fast_batched", "vendor", "fakes", 850, "excluded: policy", "", ("it does not run the standard activation format",)),
        ("rocm_fast", "amd", "fakes", 800, "excluded: env", "disabled by MOE_CORE_DISABLE (rocm_fast)", ("it runs on rocm, not cuda",)),
        ("reference", "torch", "reference", 0, "runner-up", "", ()),
    ]
    assert sel.fallbacks == ("gpu_fast", "reference")
    assert sel.backend is reg.specs["portable"] and sel.query.platform == H100 and sel.query.weight_key == FP8.weight_key


def test_a_priority_override_joins_the_exclusion_note_and_reranks(reg):
    sel = choose(reg, env={"MOE_CORE_PRIORITY": "gpu_fast=1", "MOE_CORE_DISABLE": "gpu_fast"})
    assert sel.name == "portable"
    assert [c.name for c in sel.candidates] == ["opt_in", "gpu_fast_batched", "rocm_fast", "portable", "gpu_fast", "reference"]
    gpu_fast = next(c for c in sel.candidates if c.name == "gpu_fast")
    assert (gpu_fast.priority, gpu_fast.note) == (1, "disabled by MOE_CORE_DISABLE (gpu_fast); priority from MOE_CORE_PRIORITY")


def test_per_family_priority_ranks_the_layer_s_quant_family(reg):
    unquantized = choose(reg, scheme=UNQUANTIZED)
    assert unquantized.name == "portable" and next(c.priority for c in unquantized.candidates if c.name == "portable") == 1000
    assert choose(reg).name == "gpu_fast"  # fp8: portable keeps its 500


def test_an_explicit_request_lists_the_others_as_never_used(reg):
    sel = choose(reg, cfg=dataclasses.replace(CFG, moe_backend="portable"), env={"MOE_CORE_DISABLE": "portable"})
    assert (sel.name, sel.source, sel.fallbacks) == ("portable", SelectionSource.REQUEST, ())
    assert [(c.name, c.status.value, c.note) for c in sel.candidates] == [
        ("opt_in", "not requested", ""),
        ("gpu_fast", "not requested", ""),
        ("gpu_fast_batched", "unsupported", ""),
        ("rocm_fast", "unsupported", ""),
        ("portable", "selected", ""),  # the request beats MOE_CORE_DISABLE, and no env note is attached
        ("reference", "not requested", ""),
    ]


@pytest.mark.parametrize("how", ["moe_backend", "MOE_CORE_BACKEND"])
def test_a_request_maps_to_the_batched_variant_in_batched_format(reg, how):
    batched = dataclasses.replace(CFG, parallel=ParallelConfig(use_batched_activation_format=True))
    if how == "moe_backend":
        sel = choose(reg, cfg=dataclasses.replace(batched, moe_backend="gpu_fast"))
    else:
        sel = choose(reg, cfg=batched, env={"MOE_CORE_BACKEND": "gpu_fast"})
    assert (sel.name, sel.source) == ("gpu_fast_batched", SelectionSource.REQUEST if how == "moe_backend" else SelectionSource.ENV)
    assert choose(reg, env={"MOE_CORE_BACKEND": "gpu_fast"}).name == "gpu_fast"  # the standard format keeps the name
    disabled = choose(reg, cfg=dataclasses.replace(batched, moe_backend="gpu_fast"), env={"MOE_CORE_DISABLE": "gpu_fast_batched"})
    assert (disabled.name, disabled.source) == ("gpu_fast_batched", SelectionSource.REQUEST)  # still the request, not a substitute


# ---------------------------------------------------------------- typed errors


@pytest.mark.parametrize("how,where", [("moe_backend", "moe_backend"), ("env", "MOE_CORE_BACKEND")])
def test_an_unsupported_request_names_its_origin_the_reasons_and_the_table(reg, how, where):
    cfg, env = (dataclasses.replace(CFG, moe_backend="gpu_fast"), {}) if how == "moe_backend" else (CFG, {"MOE_CORE_BACKEND": "gpu_fast"})
    with pytest.raises(BackendUnsupportedError) as err:
        choose(reg, cfg=cfg, env=env, platform=preset("a100"))
    assert str(err.value).startswith(f"MoE backend 'gpu_fast' (requested by {where}) does not support this layer since needs compute "
                                     "capability 9.0+.\nMoE layer: E=8 top_k=2")
    assert (err.value.name, err.value.source, err.value.reasons) == ("gpu_fast", f"requested by {where}", ("needs compute capability 9.0+",))
    assert "portable          acme" in str(err.value) and "not requested" in str(err.value)


def test_a_requested_backend_of_another_scheme_is_listed_with_its_reason(reg):
    with pytest.raises(BackendUnsupportedError) as err:
        choose(reg, cfg=dataclasses.replace(CFG, moe_backend="int8_only"))
    assert err.value.reasons == ("it does not implement the fp8-block scheme",)
    assert str(err.value).split("\n")[3].startswith("1  int8_only")  # the first row of the table


def test_no_backend_summarises_the_layer_and_logs_each_rejection(reg, caplog):
    a100 = preset("a100")
    with caplog.at_level(logging.DEBUG, logger="moe_core"), pytest.raises(NoBackendError) as err:
        choose(reg, platform=a100, env={"MOE_CORE_DISABLE": "portable,reference"})
    assert str(err.value).startswith(f"No MoE backend supports the deployment configuration (fp8-block, standard format, on {a100.describe()}).\n"
                                     "MoE layer: E=8")
    assert "gpu_fast_batched  vendor" in err.value.table and "needs compute capability 9.0+" in err.value.table
    logged = {r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG}
    assert "MoE backend 'gpu_fast' rejected: unsupported: needs compute capability 9.0+" in logged
    assert "MoE backend 'portable' rejected: excluded: env: ok" in logged
    assert "MoE backend 'opt_in' rejected: manual only: ok" in logged


# ---------------------------------------------------------------- logs


def test_the_choice_is_logged_at_info_and_the_unused_at_debug(reg, caplog):
    with caplog.at_level(logging.DEBUG, logger="moe_core"):
        choose(reg)
    info = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert info == ["Using gpu_fast MoE backend (priority) for fp8-block out of potential backends: "
                    "['opt_in', 'gpu_fast', 'gpu_fast_batched', 'rocm_fast', 'portable', 'reference']."]
    debug = {r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG}
    assert debug == {
        "MoE backend 'opt_in' not used: manual only: ok",
        "MoE backend 'gpu_fast_batched' not used: excluded: policy: it does not run the standard activation format",
        "MoE backend 'rocm_fast' not used: unsupported: it runs on rocm, not cuda",
    }  # the selected and the runner-ups are not "not used"
    assert not any(r.levelno == logging.WARNING for r in caplog.records)  # chosen automatically: no warning


def test_running_an_unvalidated_backend_on_request_warns_once(caplog):
    checked = Validation(hardware="NVIDIA H100 80GB HBM3", date="2026-11-28")
    reg = registry(FakeBackend(spec("raw", 10)), FakeBackend(spec("checked", 20, validation=checked)))
    with caplog.at_level(logging.WARNING, logger="moe_core"):
        choose(reg, cfg=dataclasses.replace(CFG, moe_backend="raw"))
        resolver.clear_cache()
        choose(reg, env={"MOE_CORE_BACKEND": "raw"})
        choose(reg, cfg=dataclasses.replace(CFG, moe_backend="checked"))
    assert [r.getMessage() for r in caplog.records] == [
        "MoE backend 'raw' was requested, but its numerics were never validated on hardware (plugin fakes); running it as asked"]


# ---------------------------------------------------------------- measured rankings


def ranking(*entries: tuple[int, int, tuple[str, ...]], shape: MoEConfig = CFG) -> Ranking:
    """A user ranking for ``shape`` on an H100: (tokens_min, tokens_max, order) per entry."""
    return Ranking(H100.device_name, tuple(
        RankingEntry(shape.num_experts, shape.top_k, shape.hidden_size, shape.intermediate_size, "bfloat16", "fp8-block", lo, hi, order)
        for lo, hi, order in entries), MeasuredWith((), "2026-11-28T00:00:00+00:00", "test"))


USER = "moe_core.ranking.use_ranking(), 2026-11-28"


@pytest.fixture
def env(tmp_path):
    return {"MOE_CORE_CACHE_DIR": str(tmp_path)}  # no autotune cache of this machine takes part


def test_the_measured_fastest_eligible_backend_decides_and_says_so(reg, env):
    use_ranking(ranking((1, 8, ("rocm_fast", "opt_in", "portable", "gpu_fast"))))  # the first two are not eligible on an H100
    sel = choose(reg, env=env, num_tokens=4)
    assert (sel.name, sel.source, sel.decided_by) == ("portable", SelectionSource.RANKING, f"measured: {USER}")
    assert [(c.name, c.status.value) for c in sel.candidates if c.eligible] == [("gpu_fast", "runner-up"), ("portable", "selected"),
                                                                                  ("reference", "runner-up")]
    assert {c.name: c.note for c in sel.candidates if c.note} == {"opt_in": "never auto-selected; request it by name",
                                                                 "portable": "measured fastest for this token count"}
    assert f"=> portable (by ranking; measured: {USER}); not validated on hardware" in sel.explain()


def test_the_ranking_note_follows_an_override_note(reg, env):
    use_ranking(ranking((1, 8, ("portable",))))
    sel = choose(reg, env={**env, "MOE_CORE_PRIORITY": "portable=1"}, num_tokens=2)
    assert note(sel, "portable") == "priority from MOE_CORE_PRIORITY; measured fastest for this token count"


def test_the_priority_decides_when_no_measured_backend_is_eligible(reg, env):
    use_ranking(ranking((1, 8, ("rocm_fast", "opt_in"))))
    sel = choose(reg, env=env, num_tokens=8)
    why = f"by priority: none of the measured backends (rocm_fast, opt_in) is eligible here ({USER})"
    assert (sel.name, sel.source, sel.decided_by) == ("gpu_fast", SelectionSource.PRIORITY, why)
    assert sel.explain().endswith(f"=> gpu_fast (by priority); not validated on hardware\n   {why}")
    assert all(c.note in ("", "never auto-selected; request it by name") for c in sel.candidates)


def test_the_priority_decides_outside_the_measured_range_and_without_a_token_count(reg, env):
    use_ranking(ranking((1, 8, ("portable",))))
    without = choose(reg, env=env)
    assert (without.name, without.decided_by) == ("gpu_fast", "")
    beyond = choose(reg, env=env, num_tokens=9)  # after a selection without a token count: not its cached answer
    assert (beyond.name, beyond.source, beyond.decided_by) == ("gpu_fast", SelectionSource.PRIORITY, "by priority: no measurement for this shape")
    assert choose(reg, env=env).decided_by == ""


def test_each_token_range_and_each_ranking_decides_for_itself(reg, env):
    use_ranking(ranking((1, 8, ("portable",)), (9, 64, ("reference",))))
    assert [choose(reg, env=env, num_tokens=t).name for t in (3, 16, 5)] == ["portable", "reference", "portable"]
    use_ranking(ranking((1, 8, ("reference",))))  # a new ranking whose first entry orders them otherwise
    assert choose(reg, env=env, num_tokens=3).name == "reference"


def test_a_repeated_token_count_is_answered_without_looking_up_the_rankings(reg, env, monkeypatch):
    use_ranking(ranking((1, 8, ("portable",))))
    choose(reg, env=env, num_tokens=2)  # the first selection reads this machine's autotune cache (none here)
    first = choose(reg, env=env, num_tokens=4)
    monkeypatch.setattr(ranking_sources, "measurement", lambda *a, **k: pytest.fail("looked up again"))
    assert choose(reg, env=env, num_tokens=4) is first


def test_the_caches_are_bounded(reg, env, monkeypatch):
    monkeypatch.setattr(resolver, "_CACHE_SIZE", 2)
    layers = [dataclasses.replace(CFG, num_experts=n) for n in (8, 16, 32)]
    first = choose(reg, cfg=layers[0])
    sizes = []
    for cfg in layers:
        choose(reg, cfg=cfg)
        sizes.append(len(resolver._cache))
    assert sizes == [1, 2, 2]
    assert choose(reg, cfg=layers[0]) is not first  # the oldest entry went first
    memo = []
    for tokens in range(1, 6):
        choose(reg, env=env, num_tokens=tokens)
        memo.append(len(resolver._by_tokens))
    assert memo == [1, 2, 3, 4, 1]  # two per cache entry, then emptied


# ---------------------------------------------------------------- autotuning on a miss (the measuring itself: test_autotune.py)


class FakeTuner:
    """Stands in for autotune.on_miss: records its arguments; 'tunes' by installing a ranking (fastest: ``order``)."""

    def __init__(self, order=("portable",), outcome=autotune.Miss.TUNED):
        self.order, self.outcome, self.calls = order, outcome, []

    def __call__(self, query, eligible, tokens, registry, environ, is_real):
        self.calls.append((query, list(eligible), tokens, registry, environ, is_real))
        if self.outcome is autotune.Miss.TUNED:
            use_ranking(ranking((1, 8, self.order)))
        return self.outcome


@pytest.fixture
def tuning(monkeypatch, tmp_path):
    monkeypatch.setattr(resolver, "current_platform", lambda: HERE)
    return {"MOE_CORE_AUTOTUNE": "1", "MOE_CORE_CACHE_DIR": str(tmp_path)}


def test_an_unmeasured_layer_is_tuned_then_decided_by_the_measurement(reg, tuning, monkeypatch):
    tuner = FakeTuner()
    monkeypatch.setattr(autotune, "on_miss", tuner)
    sel = choose(reg, env=tuning, num_tokens=4)
    assert (sel.name, sel.source, sel.decided_by) == ("portable", SelectionSource.RANKING, f"measured: {USER}")
    ((query, eligible, tokens, registry_arg, environ, is_real),) = tuner.calls
    assert (query, eligible, tokens, registry_arg, environ) == (sel.query, ["gpu_fast", "portable", "reference"], 4, reg, tuning)
    assert is_real(HERE) and not is_real(dataclasses.replace(HERE, simulated=True))
    assert not is_real(dataclasses.replace(H100, simulated=False))  # real, but not this machine
    assert choose(reg, env=tuning, num_tokens=5) is sel and len(tuner.calls) == 1  # measured: no second tuning


def test_a_measurement_found_at_tuning_that_names_no_eligible_backend_says_so(reg, tuning, monkeypatch):
    tuner = FakeTuner(order=("gpu_fast",))  # as another process with other settings measured it meanwhile
    monkeypatch.setattr(autotune, "on_miss", tuner)
    sel = choose(reg, env={**tuning, "MOE_CORE_DISABLE": "gpu_fast"}, num_tokens=4)
    why = f"by priority: none of the measured backends (gpu_fast) is eligible here ({USER})"
    assert (sel.name, sel.source, sel.decided_by, len(tuner.calls)) == ("portable", SelectionSource.PRIORITY, why, 1)


def test_a_deferred_tuning_answers_by_priority_and_is_not_cached(reg, tuning, monkeypatch):
    tuner = FakeTuner(outcome=autotune.Miss.DEFERRED)
    monkeypatch.setattr(autotune, "on_miss", tuner)
    sel = choose(reg, env=tuning, num_tokens=4)
    assert (sel.name, sel.source, sel.decided_by) == ("gpu_fast", SelectionSource.PRIORITY, "by priority: no measurement for this shape")
    choose(reg, env=tuning, num_tokens=4)
    assert len(tuner.calls) == 2


def test_a_tuned_answer_is_not_reused_for_an_unmeasured_token_count(reg, tuning, monkeypatch):
    tuner = FakeTuner()
    monkeypatch.setattr(autotune, "on_miss", tuner)
    assert choose(reg, env=tuning, num_tokens=4).source is SelectionSource.RANKING
    tuner.outcome = autotune.Miss.DEFERRED
    beyond = choose(reg, env=tuning, num_tokens=100)
    assert (beyond.name, beyond.source, len(tuner.calls)) == ("gpu_fast", SelectionSource.PRIORITY, 2)


def test_no_tuning_without_a_token_count_with_a_measurement_or_when_off(reg, tuning, monkeypatch):
    monkeypatch.setattr(autotune, "on_miss", lambda *a: pytest.fail("tuned"))
    assert choose(reg, env=tuning).decided_by == ""
    off = {k: v for k, v in tuning.items() if k != "MOE_CORE_AUTOTUNE"}
    assert choose(reg, env=off, num_tokens=4).decided_by == "by priority: no measurement for this shape"
    use_ranking(ranking((1, 8, ("portable",))))
    assert choose(reg, env=tuning, num_tokens=4).name == "portable"


# ---------------------------------------------------------------- defaults


def test_platform_registry_and_environment_default_to_this_process(reg, monkeypatch):
    monkeypatch.setattr(resolver, "current_platform", lambda: H100)
    monkeypatch.setattr(resolver, "default_registry", lambda: reg)
    monkeypatch.setitem(os.environ, "MOE_CORE_DISABLE", "gpu_fast")
    sel = resolver.select(CFG, FP8.weight_key, FP8.activation_key)
    assert (sel.name, sel.query.platform) == ("portable", H100)
    assert note(sel, "gpu_fast") == "disabled by MOE_CORE_DISABLE (gpu_fast)"


# ---------------------------------------------------------------- the vLLM-compatibility overlay (MOE_CORE_COMPAT=vllm)


@pytest.fixture
def seeds():
    """Backends named as the seeds name them; flashinfer_trtllm needs sm100, deepgemm sm90, aiter is ROCm only."""
    return registry(
        FakeBackend(spec("aiter", 1000, family="aiter", devices={DeviceKind.ROCM})),
        FakeBackend(spec("flashinfer_trtllm", 900, family="flashinfer", devices={DeviceKind.CUDA}), min_capability=(10, 0)),
        FakeBackend(spec("flashinfer_cutlass", 800, family="flashinfer", devices={DeviceKind.CUDA})),
        FakeBackend(spec("deepgemm", 700, family="deepgemm", devices={DeviceKind.CUDA}), min_capability=(9, 0)),
        FakeBackend(spec("triton", 500, family="triton")),
    )


VLLM = {"MOE_CORE_COMPAT": "vllm"}


def test_compat_variables_are_read_only_in_compatibility_mode(seeds):
    assert choose(seeds, env={"VLLM_USE_FLASHINFER_MOE_FP8": "0"}).name == "flashinfer_cutlass"
    sel = choose(seeds, env={**VLLM, "VLLM_USE_FLASHINFER_MOE_FP8": "0"})
    assert sel.name == "deepgemm"
    assert [(c.name, c.status.value, c.note) for c in sel.candidates if c.note] == [
        ("flashinfer_trtllm", "excluded: env", "disabled by VLLM_USE_FLASHINFER_MOE_FP8=0 (compat)"),
        ("flashinfer_cutlass", "excluded: env", "disabled by VLLM_USE_FLASHINFER_MOE_FP8=0 (compat)"),
    ]


def test_compat_restriction_notes_the_others_and_raises_the_seeds_message(seeds):
    only = {**VLLM, "VLLM_USE_FLASHINFER_MOE_FP8": "1"}
    sel = choose(seeds, env=only)
    assert sel.name == "flashinfer_cutlass"
    restricted = "not in flashinfer_trtllm, flashinfer_cutlass (Found VLLM_USE_FLASHINFER_MOE_FP8=1)"
    assert {c.name: c.note for c in sel.candidates if c.note} == {"aiter": restricted, "deepgemm": restricted, "triton": restricted,
                                                                 "reference": restricted}
    with pytest.raises(NoBackendError) as err:
        choose(seeds, env={**only, "MOE_CORE_DISABLE": "flashinfer_cutlass"})
    assert str(err.value).startswith(
        "No MoE backend supports the deployment configuration (Found VLLM_USE_FLASHINFER_MOE_FP8=1, but no FlashInfer FP8 MoE backend "
        f"supports the configuration; fp8-block, standard format, on {H100.describe()}).")


def test_a_compat_forced_backend_is_a_request_named_by_its_variables(seeds):
    sel = choose(seeds, env={**VLLM, "VLLM_USE_DEEP_GEMM": "1"})
    assert (sel.name, sel.source) == ("deepgemm", SelectionSource.ENV)
    with pytest.raises(BackendUnsupportedError, match=r"'deepgemm' \(requested by VLLM_USE_DEEP_GEMM/VLLM_MOE_USE_DEEP_GEMM=1\) does not"):
        choose(seeds, env={**VLLM, "VLLM_USE_DEEP_GEMM": "1"}, platform=preset("a100"))
    with pytest.raises(UnknownBackendError, match=r"^VLLM_TEST_FORCE_FP8_MARLIN=1='marlin' is not a registered MoE backend"):
        choose(seeds, env={**VLLM, "VLLM_TEST_FORCE_FP8_MARLIN": "1"})


def test_a_compat_veto_binds_automatic_selection_and_requests(seeds):
    mi300x = preset("mi300x")
    sel = choose(seeds, scheme=UNQUANTIZED, platform=mi300x, env=VLLM)
    aiter = next(c for c in sel.candidates if c.name == "aiter")
    assert (sel.name, aiter.status, aiter.support.reasons) == ("triton", CandidateStatus.UNSUPPORTED, (NOT_ENABLED,))
    with pytest.raises(BackendUnsupportedError) as err:
        choose(seeds, cfg=dataclasses.replace(CFG, moe_backend="aiter"), scheme=UNQUANTIZED, platform=mi300x, env=VLLM)
    assert err.value.reasons == (NOT_ENABLED,)
    assert choose(seeds, scheme=UNQUANTIZED, platform=mi300x, env={**VLLM, "VLLM_ROCM_USE_AITER": "1"}).name == "aiter"
    assert choose(seeds, scheme=UNQUANTIZED, platform=mi300x).name == "aiter"  # no veto outside compatibility mode
