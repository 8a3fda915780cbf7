"""The joint (dispatcher, experts backend) selection on concrete layers: what a caller of select_pair reads back.

The Hypothesis properties (test_pair_properties.py) check which pair wins over random registries; these examples
pin what they do not: the requests and where they came from, the errors (type, fields, the text a user acts on),
each dispatcher's row, the reason sentence, the explain text and the JSON of ``to_dict``.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from moe_core import hookimpl
from moe_core.config import ActivationFormat, MoEConfig, ParallelConfig
from moe_core.dispatch.ranking import ranking_from_times, use_dispatch_ranking
from moe_core.dispatch.spec import DispatchSpec
from moe_core.errors import BackendUnsupportedError, InvalidEnvironmentError, NoBackendError, UnknownBackendError
from moe_core.pair import select_pair
from moe_core.platform import DeviceKind, preset
from moe_core.quant import scheme
from moe_core.registry import Registry
from moe_core.resolver import current_platform
from moe_core.selection import SelectionSource
from moe_core.spec import BackendSpec
from moe_core.support import Support
from moe_core.testing.fakes import FakeBackend, FakeDispatch, FakeDispatchPlugin, FakeKernel, FakePlugin

CPU, H100 = preset("cpu"), preset("h100")
FP8 = scheme("fp8-block")
STANDARD, BATCHED = ActivationFormat.STANDARD, ActivationFormat.BATCHED_EXPERTS
#: The built-in dispatchers' traits, as their rows note them.
A2A_TRAITS = "standard, host sync, not CUDA-graph safe"
SYNC_FREE = "no host sync, CUDA-graph safe"
ON_CPU = "cpu cpu (simulated)"


def ep_cfg(**parallel) -> MoEConfig:
    return MoEConfig(8, 2, 128, 128, dtype=torch.bfloat16, parallel=ParallelConfig(ep_size=2, **parallel))


def builtin(*fakes: FakeBackend) -> Registry:
    """The built-in dispatchers and reference experts, plus ``fakes`` (experts backends of plugin ``fakes``)."""
    reg = Registry(autoload=False, environ={})
    if fakes:
        reg.register(FakePlugin(fakes), name="fakes")
    return reg


def experts(name: str, priority: int, formats=frozenset(ActivationFormat)) -> FakeBackend:
    """An experts backend for fp8-block on CPUs that takes an expert map."""
    return FakeBackend(BackendSpec(name=name, family="acme", priority=priority, schemes=(FP8,), kernel=FakeKernel,
                                   devices={DeviceKind.CPU}, formats=formats, supports_expert_map=True))


def dispatcher(name: str, priority: int, devices=frozenset({DeviceKind.CPU}), fmt=STANDARD, **kw) -> FakeDispatch:
    return FakeDispatch(DispatchSpec(name=name, family="acme", priority=priority, output_format=fmt,
                                     implementation="moe_core.dispatch.naive:NaiveDispatcher", host_sync=False,
                                     cuda_graph_safe=True, devices=devices, **kw))


def rows(pair_or_table) -> list[tuple[str, str]]:
    """(dispatcher, status) of each row, in rank order."""
    return [(c.name, c.status.value) for c in pair_or_table.dispatchers]


def pair(cfg: MoEConfig | None = None, keys=FP8.keys, **kw):
    kw = {"platform": CPU, "registry": builtin(), "environ": {}} | kw
    return select_pair(ep_cfg() if cfg is None else cfg, *keys, **kw)


# ---------------------------------------------------------------------------------------------- the automatic pair


def test_the_automatic_pair_ranks_every_dispatcher_and_says_why():
    got = pair()
    assert (got.dispatcher.name, got.experts.name, got.dispatch_source) == ("all_to_all", "reference", SelectionSource.PRIORITY)
    assert got.activation_format is STANDARD and not got.config.parallel.use_batched_activation_format
    assert rows(got) == [("all_to_all", "selected"), ("packed_all_to_all", "runner-up"), ("batched_all_to_all", "runner-up"),
                         ("naive", "runner-up"), ("peer_copy", "unsupported")]
    by_name = {c.name: c for c in got.dispatchers}
    assert by_name["all_to_all"].note == A2A_TRAITS and by_name["all_to_all"].priority == 200
    assert by_name["all_to_all"].family == by_name["all_to_all"].plugin == "torch_distributed"
    assert by_name["peer_copy"].support.reasons == ("it runs on cuda, not cpu",)
    assert got.reason == ("reference (by priority) ranks highest among the experts backends that run a format an eligible "
                          f"dispatcher produces; all_to_all is the highest-ranked eligible dispatcher producing the standard format ({A2A_TRAITS})")


def test_each_format_a_dispatcher_produces_gets_its_own_experts_selection():
    got = pair()
    assert [(o.format, o.selection.name, o.selection.query.activation_format, o.error) for o in got.outcomes] == [
        (STANDARD, "reference", STANDARD, ""), (BATCHED, "reference", BATCHED, "")]
    assert all(o.selection.query.config.parallel.ep_size == 2 for o in got.outcomes)


def test_the_experts_selection_sees_the_layers_keys_platform_environment_and_token_count():
    reg = builtin(experts("acme_fp8", 500))
    got = pair(registry=reg, platform=H100, num_tokens=16)
    assert (got.experts.query.weight_key, got.experts.query.activation_key) == FP8.keys
    assert got.experts.query.platform == H100 and got.experts.name == "reference"  # acme_fp8 runs on CPUs only
    assert got.experts.decided_by == "by priority: no measurement for this shape"  # a token count was given
    assert ("peer_copy", "runner-up") in rows(got)  # the dispatchers were asked about the H100 too
    on_cpu = pair(registry=reg)
    assert (on_cpu.experts.name, on_cpu.experts.source, on_cpu.experts.decided_by) == ("acme_fp8", SelectionSource.PRIORITY, "")
    forced = pair(registry=reg, environ={"MOE_CORE_BACKEND": "reference"})
    assert (forced.experts.name, forced.experts.source) == ("reference", SelectionSource.ENV)


def test_the_pair_goes_to_the_format_whose_experts_backend_ranks_highest():
    got = pair(registry=builtin(experts("acme_batched", 900, formats={BATCHED}), experts("acme_standard", 500)))
    assert (got.dispatcher.name, got.experts.name, got.activation_format) == ("batched_all_to_all", "acme_batched", BATCHED)
    assert got.config.parallel.use_batched_activation_format
    assert [(o.format, o.selection.name) for o in got.outcomes] == [(STANDARD, "acme_standard"), (BATCHED, "acme_batched")]
    assert got.reason.endswith("batched_all_to_all is the highest-ranked eligible dispatcher producing the batched_experts "
                               f"format (batched_experts, {SYNC_FREE})")


def test_a_batched_only_layer_excludes_the_standard_dispatchers_by_policy():
    got = pair(ep_cfg(use_batched_activation_format=True))
    assert got.dispatcher.name == "batched_all_to_all" and [o.format for o in got.outcomes] == [BATCHED]
    assert rows(got) == [("all_to_all", "excluded: policy"), ("packed_all_to_all", "excluded: policy"),
                         ("batched_all_to_all", "selected"), ("naive", "excluded: policy"), ("peer_copy", "excluded: policy")]
    assert got.dispatchers[0].note == f"{A2A_TRAITS}; the layer sets use_batched_activation_format"


def test_a_manual_only_dispatcher_is_never_chosen_unless_requested():
    reg = Registry(autoload=False, builtin=False, environ={})
    reg.register(FakePlugin([experts("acme", 100)]), name="fakes")
    reg.register(FakeDispatchPlugin([dispatcher("hand_tuned", 900, auto_select=False), dispatcher("plain", 100)]), name="acme_dispatch")
    got = pair(registry=reg)
    assert got.dispatcher.name == "plain" and rows(got) == [("hand_tuned", "manual only"), ("plain", "selected")]
    assert got.dispatchers[0].note == f"standard, {SYNC_FREE}; never auto-selected, request it by name"
    assert got.dispatchers[0].plugin == "acme_dispatch" and got.dispatchers[0].family == "acme"
    asked = pair(ep_cfg(dispatch_backend="hand_tuned"), registry=reg)
    assert (asked.dispatcher.name, asked.dispatch_source) == ("hand_tuned", SelectionSource.REQUEST)


class _Fp8WireDispatchers:
    """A plugin whose dispatcher sends fp8-block layers only (its scales travel with the tokens)."""

    @hookimpl
    def moe_core_dispatchers(self):
        return [dispatcher("fp8_wire", 500).spec]

    @hookimpl
    def moe_core_dispatch_supports(self, dispatcher, weight_key, activation_key):
        if dispatcher.name != "fp8_wire":
            return None
        return Support.yes() if (weight_key, activation_key) == FP8.keys else Support.no("it sends fp8-block layers only")


def test_dispatcher_plugins_are_asked_with_the_layers_quantization():
    reg = builtin()
    reg.register(_Fp8WireDispatchers(), name="fp8_wire")
    assert pair(registry=reg).dispatcher.name == "fp8_wire"
    unquantized = pair(keys=(None, None), registry=reg)
    assert unquantized.dispatcher.name == "all_to_all"
    assert unquantized.dispatchers[0].support.reasons == ("it sends fp8-block layers only",)
    weight_only = pair(keys=(FP8.weight_key, None), registry=reg)  # fp8 weights, 16-bit activations
    assert weight_only.dispatcher.name == "all_to_all"


def test_without_a_platform_or_registry_the_current_ones_serve(monkeypatch):
    monkeypatch.delenv("MOE_CORE_DISPATCH", raising=False)
    got = select_pair(ep_cfg(), environ={})
    assert got.experts.query.platform == current_platform()
    assert {"all_to_all", "batched_all_to_all", "naive"} <= {c.name for c in got.dispatchers}


# ---------------------------------------------------------------------------------------------- requests


@pytest.mark.parametrize("where, source", [("dispatch_backend", SelectionSource.REQUEST), ("MOE_CORE_DISPATCH", SelectionSource.ENV)])
def test_a_requested_dispatcher_is_used_and_the_others_are_not_requested(where, source):
    cfg, environ = (ep_cfg(dispatch_backend="naive"), {}) if where == "dispatch_backend" else (ep_cfg(), {"MOE_CORE_DISPATCH": "naive"})
    got = pair(cfg, environ=environ)
    assert (got.dispatcher.name, got.dispatch_source) == ("naive", source)
    assert rows(got) == [("all_to_all", "not requested"), ("packed_all_to_all", "not requested"),
                         ("batched_all_to_all", "not requested"), ("naive", "selected"), ("peer_copy", "not requested")]
    assert [o.format for o in got.outcomes] == [STANDARD]
    assert got.reason.endswith(f"; naive is requested (standard, {SYNC_FREE})")
    assert got.to_dict()["dispatch_source"] == source.value


def test_the_environments_request_is_read_from_the_process_unless_an_environment_is_given(monkeypatch):
    monkeypatch.setenv("MOE_CORE_DISPATCH", "naive")
    got = select_pair(ep_cfg(), *FP8.keys, platform=CPU, registry=builtin())
    assert (got.dispatcher.name, got.dispatch_source) == ("naive", SelectionSource.ENV)
    assert pair(environ={}).dispatcher.name == "all_to_all"


@pytest.mark.parametrize("where", ["dispatch_backend", "MOE_CORE_DISPATCH"])
def test_a_requested_dispatcher_that_cannot_serve_the_layer_raises_with_its_reasons_and_the_table(where):
    cfg, environ = (ep_cfg(dispatch_backend="peer_copy"), {}) if where == "dispatch_backend" else (ep_cfg(), {"MOE_CORE_DISPATCH": "peer_copy"})
    with pytest.raises(BackendUnsupportedError) as caught:
        pair(cfg, environ=environ)
    exc = caught.value
    assert (exc.name, exc.source, exc.reasons) == ("peer_copy", f"requested by {where}", ("it runs on cuda, not cpu",))
    lines = str(exc).split("\n")
    assert lines[0] == f"dispatcher 'peer_copy' (requested by {where}) does not support this layer since it runs on cuda, not cpu."
    assert lines[1] == f"Dispatchers for ep_size=2 | platform: {ON_CPU}"
    assert lines[2].split() == ["#", "dispatcher", "family", "plugin", "prio", "status", "reasons"]
    assert [line.split()[1] for line in lines[3:8]] == ["all_to_all", "packed_all_to_all", "batched_all_to_all", "naive", "peer_copy"]
    assert "not requested" in lines[3] and lines[7].split()[5] == "unsupported" and lines[7].endswith("it runs on cuda, not cpu")
    assert lines[8:] == ["Drop the request to let moe-core choose, or change the layer configuration."]


def test_a_batched_only_layer_refuses_a_requested_standard_dispatcher():
    with pytest.raises(BackendUnsupportedError) as caught:
        pair(ep_cfg(use_batched_activation_format=True, dispatch_backend="naive"))
    assert caught.value.reasons == ("it produces the standard format and the layer sets use_batched_activation_format",)
    with pytest.raises(BackendUnsupportedError) as caught:  # a dispatcher that cannot run at all says why first
        pair(ep_cfg(use_batched_activation_format=True, dispatch_backend="peer_copy"))
    assert caught.value.reasons == ("it runs on cuda, not cpu",)
    got = pair(ep_cfg(use_batched_activation_format=True, dispatch_backend="batched_all_to_all"))
    assert got.dispatcher.name == "batched_all_to_all"
    naive = next(c for c in got.dispatchers if c.name == "naive")
    assert naive.status.value == "not requested" and naive.support.ok


def test_an_unknown_dispatcher_is_named_with_the_registered_ones():
    with pytest.raises(UnknownBackendError) as caught:
        pair(ep_cfg(dispatch_backend="nope"))
    assert (caught.value.name, caught.value.valid) == ("nope", ("all_to_all", "batched_all_to_all", "naive", "packed_all_to_all", "peer_copy"))
    assert str(caught.value) == ("dispatch_backend='nope' is not a registered dispatcher. Registered dispatchers: all_to_all, "
                                 "batched_all_to_all, naive, packed_all_to_all, peer_copy. Install the plugin that provides it "
                                 "(see `moe-core list`) or pick one of these.")
    with pytest.raises(InvalidEnvironmentError) as caught:
        pair(environ={"MOE_CORE_DISPATCH": "nope"})
    assert caught.value.variable == "MOE_CORE_DISPATCH" and caught.value.value == "nope"


def test_a_measured_ranking_decides_and_marks_its_dispatcher_selected():
    measured = ranking_from_times("H100", {(2, 8, 2, 128, "bfloat16", 16): {"naive": 100.0, "all_to_all": 150.0}})
    use_dispatch_ranking(measured)
    try:
        got = pair(num_tokens=16)
        asked = pair(ep_cfg(dispatch_backend="all_to_all"), num_tokens=16)
    finally:
        use_dispatch_ranking(None)
    assert (got.dispatcher.name, got.dispatch_source) == ("naive", SelectionSource.RANKING)
    assert rows(got) == [("all_to_all", "runner-up"), ("packed_all_to_all", "runner-up"), ("batched_all_to_all", "runner-up"),
                         ("naive", "selected"), ("peer_copy", "unsupported")]
    assert got.reason == ("naive is the first eligible dispatcher of the measured ranking for expert-parallel size 2 at 16 tokens "
                          "per rank (H100: naive 100 µs, all_to_all 150 µs); reference (by priority) runs its standard format")
    assert (asked.dispatcher.name, asked.dispatch_source) == ("all_to_all", SelectionSource.REQUEST)  # a request beats the ranking


# ---------------------------------------------------------------------------------------------- no pair


def test_without_a_dispatcher_the_error_says_none_is_registered():
    with pytest.raises(NoBackendError) as caught:
        pair(registry=Registry(autoload=False, builtin=False, environ={}))
    lines = str(caught.value).split("\n")
    assert lines[0] == f"No dispatcher supports the deployment configuration (expert parallelism of size 2 on {ON_CPU})."
    assert lines[1] == f"Dispatchers for ep_size=2 | platform: {ON_CPU}"
    assert lines[2].split() == ["#", "dispatcher", "family", "plugin", "prio", "status", "reasons"]
    assert lines[3].strip() == "-  (no dispatcher registered)"
    assert caught.value.table == "\n".join(lines[1:4])


def test_without_an_eligible_dispatcher_the_error_lists_why_each_one_is_out():
    reg = Registry(autoload=False, builtin=False, environ={})
    reg.register(FakePlugin([experts("acme", 100)]), name="fakes")
    reg.register(FakeDispatchPlugin([dispatcher("gpu_only", 900, devices={DeviceKind.CUDA}), dispatcher("hand_tuned", 100, auto_select=False)]),
                 name="acme_dispatch")
    with pytest.raises(NoBackendError) as caught:
        pair(registry=reg)
    table = caught.value.table.split("\n")
    assert table[0] == f"Dispatchers for ep_size=2 | platform: {ON_CPU}"
    assert table[2].split()[1:6] == ["gpu_only", "acme", "acme_dispatch", "900", "unsupported"] and table[2].endswith("it runs on cuda, not cpu")
    assert table[3].split()[1:6] == ["hand_tuned", "acme", "acme_dispatch", "100", "manual"]
    assert table[3].endswith("never auto-selected, request it by name; supported")
    assert str(caught.value).startswith("No dispatcher supports the deployment configuration (expert parallelism of size 2 on cpu")
    assert str(caught.value).endswith("\nInstall a plugin whose dispatcher runs here, request a manual one by name (MOE_CORE_DISPATCH or "
                                      "ParallelConfig(dispatch_backend=...)), or change the expert-parallel configuration.")


def test_without_an_experts_backend_for_any_offered_format_the_error_shows_each_formats_reason():
    with pytest.raises(NoBackendError) as caught:
        pair(environ={"MOE_CORE_DISABLE": "reference"})
    message = str(caught.value).split("\n")
    assert message[0] == ("No (dispatcher, experts backend) pair supports the deployment configuration (fp8-block with expert "
                          "parallelism: no experts backend runs a format an eligible dispatcher produces).")
    table = caught.value.table.split("\n")
    assert table[0] == f"Dispatchers for ep_size=2 | platform: {ON_CPU}" and len(table) == 9
    assert [line.split()[5] for line in table[2:7]] == ["runner-up"] * 4 + ["unsupported"]
    assert table[7:] == [f"standard format: No MoE backend supports the deployment configuration (fp8-block, standard format, on {ON_CPU}).",
                         f"batched_experts format: No MoE backend supports the deployment configuration (fp8-block, batched_experts "
                         f"format, on {ON_CPU})."]


# ---------------------------------------------------------------------------------------------- what callers read


def _pair_with_a_format_refused():
    """A requested experts backend that runs the standard format only: the batched format's outcome is its refusal."""
    cfg = dataclasses.replace(ep_cfg(), moe_backend="acme_standard")
    return pair(cfg, registry=builtin(experts("acme_standard", 500, formats={STANDARD})))


REFUSED = ("MoE backend 'acme_standard' (requested by moe_backend) does not support this layer since it does not run the "
           "batched_experts activation format.")


def test_a_format_the_requested_experts_backend_cannot_run_keeps_the_first_line_of_its_refusal():
    got = _pair_with_a_format_refused()
    assert (got.dispatcher.name, got.experts.name, got.experts.source) == ("all_to_all", "acme_standard", SelectionSource.REQUEST)
    assert [(o.format, o.selection is None, o.error) for o in got.outcomes] == [(STANDARD, False, ""), (BATCHED, True, REFUSED)]


def test_explain_shows_the_dispatchers_each_formats_experts_and_the_pair():
    got = _pair_with_a_format_refused()
    lines = got.explain().split("\n")
    assert lines[0] == "Dispatchers (expert-parallel size 2):"
    assert lines[1].split() == ["#", "dispatcher", "family", "plugin", "prio", "status", "reasons"]
    assert [line.split()[1] for line in lines[2:7]] == ["all_to_all", "packed_all_to_all", "batched_all_to_all", "naive", "peer_copy"]
    assert lines[2].split()[5] == "selected" and lines[2].endswith(f"{A2A_TRAITS}; supported")
    standard = got.outcomes[0].selection.explain().split("\n")
    assert lines[7:] == ["", "Experts backends for the standard format:", *standard,
                         "", "Experts backends for the batched_experts format:", REFUSED,
                         "", f"=> pair: all_to_all + acme_standard (standard); {got.reason}"]
    assert standard[-1].startswith("=> acme_standard (by request)")


def test_to_dict_is_the_json_a_consumer_reads():
    got = _pair_with_a_format_refused()
    doc = json.loads(json.dumps(got.to_dict()))
    assert set(doc) == {"dispatcher", "dispatch_source", "format", "reason", "dispatchers", "experts", "formats"}
    assert (doc["dispatcher"], doc["dispatch_source"], doc["format"], doc["reason"]) == ("all_to_all", "priority", "standard", got.reason)
    assert doc["formats"] == {"standard": "acme_standard", "batched_experts": REFUSED}
    assert doc["experts"]["backend"] == "acme_standard" and doc["experts"]["format"] == "standard"
    assert doc["dispatchers"][0] == {"name": "all_to_all", "family": "torch_distributed", "plugin": "torch_distributed", "priority": 200,
                                     "supported": True, "reasons": [], "status": "selected", "note": A2A_TRAITS}
    assert doc["dispatchers"][4] == {"name": "peer_copy", "family": "torch_symmetric_memory", "plugin": "torch_distributed", "priority": 90,
                                     "supported": False, "reasons": ["it runs on cuda, not cpu"], "status": "unsupported",
                                     "note": f"standard, {SYNC_FREE}"}
    assert [d["status"] for d in doc["dispatchers"]] == ["selected", "runner-up", "runner-up", "runner-up", "unsupported"]


def test_a_layer_without_expert_parallelism_has_no_dispatcher_in_its_text_or_json():
    cfg = MoEConfig(8, 2, 128, 128, dtype=torch.bfloat16)
    got = pair(cfg)
    assert (got.dispatcher, got.dispatch_source, got.dispatchers, got.outcomes) == (None, None, (), ())
    assert got.reason == "the layer is not expert-parallel" and got.experts.name == "reference"
    assert got.explain() == f"{got.experts.explain()}\n(no expert parallelism: no dispatcher)"
    doc = json.loads(json.dumps(got.to_dict()))
    assert {k: v for k, v in doc.items() if k != "experts"} == {
        "dispatcher": None, "dispatch_source": None, "format": "standard", "reason": "the layer is not expert-parallel",
        "dispatchers": [], "formats": {}}
    assert doc["experts"]["backend"] == "reference"


def test_cli_explain_json_reports_the_requested_pair(capsys):
    from moe_core.cli import main

    assert main(["explain", "--ep", "2", "--experts", "16", "--platform", "h100", "--dispatch", "naive", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["dispatcher"], doc["dispatch_source"], doc["format"]) == ("naive", "request", "standard")
    assert doc["formats"]["standard"] == doc["experts"]["backend"] and "naive is requested" in doc["reason"]
