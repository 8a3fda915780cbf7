"""triton_ws_sm90, the warp-specialized Gluon decode layer: its declaration, supports() reasons, plans and which forwards
take it, on any machine; its kernel compiled for sm_90 where triton 3.6 with Gluon is installed (the test says why it
skips elsewhere, as on CI's triton 3.9). Its numerics and speed are checked on an sm_90 GPU by
``python -m moe_core_triton.gluon_check``."""

import dataclasses
import os
import re
import subprocess
import sys

import pytest
import torch
from hypothesis import given, settings, strategies as st

from moe_core.config import Activation, ActivationFormat, MoEConfig
from moe_core import ranking_sources
from moe_core.platform import preset
from moe_core.presets import random_inputs
from moe_core.resolver import select
from moe_core.routing import BatchedRouting
from moe_core.spec import SupportQuery
from moe_core.testing import conformance
from moe_core_triton import ws_spec
from moe_core_triton.ws_kernel import WarpSpecializedKernel
from moe_core_triton.ws_plan import MAX_STAGES, SHARED_BUDGET, SLOT_ELEMENTS, DecodePlan, decode_plan, size_problems

QWEN3 = MoEConfig(num_experts=128, top_k=8, hidden_size=2048, intermediate_size=768)
NAME = ws_spec.WS_SM90.name


@pytest.fixture(scope="module")
def reg():
    return conformance.registry_with("moe_core_triton.plugin", name="triton")


def test_declared_below_triton_validated_and_without_the_capabilities_it_lacks(reg):
    spec, triton = reg.specs[NAME], reg.specs["triton"]
    assert spec.priority < triton.priority and spec.family == triton.family
    assert spec.validation.validated and spec.validation.log.startswith("docs/benchmarks/raw/"), spec.validation  # a GPU check's log
    assert spec.schemes == {(None, None)} and spec.formats == {ActivationFormat.STANDARD}
    assert not (spec.supports_expert_map or spec.supports_lora or spec.applies_swiglu_clamp)
    assert spec.load_kernel() is WarpSpecializedKernel and WarpSpecializedKernel.backend_name == NAME


@pytest.mark.parametrize("version, has_gluon, says", [
    ("3.6.0", True, None),
    ("3.6.1", True, None),
    ("3.9.0", True, "written for triton 3.6.x (Gluon's API changes between releases), this is triton 3.9.0"),
    ("3.5.1", True, "this is triton 3.5.1"),
    ("3.6.0", False, "triton 3.6.0 has no triton.experimental.gluon for Hopper"),
])
def test_release_reason(version, has_gluon, says):
    got = ws_spec.release_reason(version, has_gluon)
    assert (got is None) == (says is None) and (says is None or says in got), got


@pytest.mark.parametrize("platform, change, says", [
    ("h100", {}, None),
    ("h200", {"dtype": torch.float16}, None),
    ("a100", {}, "it is built for sm_90 only (wgmma, TMA, setmaxnreg), this is sm_80"),
    ("b200", {}, "this is sm_100"),
    ("h100", {"dtype": torch.float32}, "it computes in float16/bfloat16, not float32"),
    ("h100", {"activation": Activation.GELU}, "it applies SiLU only, not gelu"),
    ("h100", {"hidden_size": 2000}, "hidden_size=2000 is not a multiple of 128"),
    ("h100", {"intermediate_size": 100}, "intermediate_size=100 is not a multiple of 64"),
    ("h100", {"hidden_size": 7168}, "hidden_size=7168: 16 gathered token rows and 2 weight slots exceed a block's shared memory"),
])
def test_supports_reasons(reg, platform, change, says):
    cfg = dataclasses.replace(QWEN3, **change)
    verdict = reg.supports(reg.specs[NAME], SupportQuery(cfg, None, None, preset(platform)))
    assert verdict.ok == (says is None), verdict.explain()
    if says:
        assert says in verdict.explain()


@pytest.mark.parametrize("installed", [None, "this is triton 9.9.9"])
def test_the_installed_triton_decides_on_this_machine_not_on_a_simulated_one(reg, monkeypatch, installed):
    monkeypatch.setattr(ws_spec, "installed_triton_reason", lambda: installed)
    here = dataclasses.replace(preset("h100"), simulated=False)
    assert reg.supports(reg.specs[NAME], SupportQuery(QWEN3, None, None, preset("h100"))).ok
    verdict = reg.supports(reg.specs[NAME], SupportQuery(QWEN3, None, None, here))
    assert verdict.ok == (installed is None) and (installed is None or installed in verdict.explain())


def test_chosen_automatically_only_where_a_measured_ranking_puts_it_first_and_runs_when_asked(reg):
    """Its priority is below ``triton``'s, so without a measurement ``triton`` is chosen; the ranking shipped for the
    H200 puts it first at the token counts where it measured fastest, and it is chosen there (and only there)."""
    bf16 = dataclasses.replace(QWEN3, dtype=torch.bfloat16)
    assert select(bf16, platform=preset("h100"), registry=reg, environ={}, num_tokens=1).name == "triton"  # no ws rows there
    shipped = ranking_sources.shipped(preset("h200").device_name).ranking
    chosen = {}
    for tokens in (1, 2, 4, 8, 16, 64, 4096):
        first = shipped.order_for(bf16, None, None, tokens)[0][0]
        chosen[tokens] = select(bf16, platform=preset("h200"), registry=reg, environ={}, num_tokens=tokens).name
        assert chosen[tokens] == first, (tokens, chosen[tokens], first)
    assert NAME in chosen.values() and chosen[4096] == "triton", chosen
    asked = dataclasses.replace(QWEN3, moe_backend=NAME)
    assert select(asked, platform=preset("h100"), registry=reg, environ={}).name == NAME


@settings(max_examples=60, deadline=None, derandomize=True)
@given(tokens=st.integers(1, 64), hidden=st.integers(1, 72).map(lambda n: 64 * n), intermediate=st.integers(1, 300).map(lambda n: 32 * n))
def test_a_plan_exists_exactly_where_no_size_problem_is_named_and_fills_shared_memory(tokens, hidden, intermediate):
    plan = decode_plan(tokens, hidden, intermediate, 2)
    block_m = 8 if tokens <= 8 else 16
    assert (plan is None) == bool(size_problems(hidden, intermediate, 2, block_m))
    if plan is not None:
        assert plan.block_m == block_m and 2 <= plan.stages <= MAX_STAGES and plan.pair_items == (tokens == 1)
        used = 2 * (block_m * (hidden + 64) + plan.stages * SLOT_ELEMENTS)
        assert used <= SHARED_BUDGET and (plan.stages == MAX_STAGES or used + 2 * SLOT_ELEMENTS > SHARED_BUDGET)


@pytest.mark.parametrize("tokens, hidden, intermediate, plan", [
    (1, 2048, 768, DecodePlan(8, 8, pair_items=True)),  # Qwen3-30B-A3B: 33 KiB of rows leave room for the most slots
    (64, 2048, 768, DecodePlan(16, 8)),
    (16, 4096, 14336, DecodePlan(16, 5)),  # Mixtral-8x7B: 130 KiB of rows, 5 slots of 16 KiB
    (8, 7168, 2048, DecodePlan(8, 6)),  # DeepSeek-V3: 8 rows fit...
    (9, 7168, 2048, None),  # ...16 do not
])
def test_plans_of_known_layers(tokens, hidden, intermediate, plan):
    assert decode_plan(tokens, hidden, intermediate, 2) == plan


class _OnGPU:
    """Stands for a CUDA activation tensor where only its shape, device and element size are asked."""

    is_cuda = True

    def __init__(self, tokens: int, hidden: int):
        self.shape = (tokens, hidden)

    def element_size(self) -> int:
        return 2


@pytest.mark.parametrize("tokens, change, takes", [
    (1, {}, True),
    (64, {}, True),
    (65, {}, False),  # past decode: the inherited kernels
    (4, {"expert_map": torch.arange(128)}, False),
    (4, {"apply_router_weight_on_input": True}, False),
    (4, {"batched": True}, False),
    (4, {"cpu": True}, False),
    (4, {"deterministic": True}, False),
])
def test_which_forwards_take_the_decode_layer(tokens, change, takes):
    kernel = WarpSpecializedKernel(QWEN3, None, None)
    kernel.deterministic = change.get("deterministic", False)
    x, routing = random_inputs(dataclasses.replace(QWEN3, num_experts=8, top_k=2), tokens, device="cpu")
    if change.get("batched"):
        routing = BatchedRouting(torch.full((8,), tokens, dtype=torch.int32))
    hidden = x if change.get("cpu") else _OnGPU(tokens, QWEN3.hidden_size)
    plan = kernel.decode_plan_for(hidden, routing, change.get("expert_map"), change.get("apply_router_weight_on_input", False))
    assert (plan is not None) == takes
    if takes:
        assert plan == decode_plan(tokens, QWEN3.hidden_size, QWEN3.intermediate_size, 2)


@pytest.mark.skipif(ws_spec.installed_triton_reason() is not None,
                    reason=f"the Gluon kernel compiles with triton 3.6 only: {ws_spec.installed_triton_reason()}")
def test_the_kernel_compiles_for_sm90_warp_specialized():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-m", "moe_core_triton.ws_compile", "--tokens", "1,16"], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert [line.split()[1] for line in lines] == ["tokens=1", "tokens=16"], lines
    for line in lines:
        counts = dict(re.findall(r"(\w[\w.]*)=(\d+)", line))
        assert all(int(counts[name]) > 0 for name in ("setmaxnreg", "wgmma", "tma", "mbarrier.try_wait")), line
        assert "partition_registers=[40, 256]" in line, line  # the producer gives its registers to the consumer


@pytest.mark.skipif(ws_spec.installed_triton_reason() is not None,
                    reason=f"the Gluon layer imports with triton 3.6 only: {ws_spec.installed_triton_reason()}")
@pytest.mark.parametrize("tokens, sms, programs", [(1, 132, 8 * 12), (1, 64, 64), (16, 132, 132), (16, 4096, 128 * 12)])
def test_launch_grid_is_one_program_per_sm_or_per_possible_work_item(tokens, sms, programs):
    from moe_core.routing_guard import RoutingErrorCounter
    from moe_core_triton.blocks import BlockTable, pair_table, table_words
    from moe_core_triton.ws_decode import decode_launcher, weight_descriptors, ws_decode_args

    plan = decode_plan(tokens, QWEN3.hidden_size, QWEN3.intermediate_size, 2)
    pairs = tokens * QWEN3.top_k
    table = pair_table(torch.zeros(pairs, dtype=torch.int32), 128, 128, plan.block_m, errors=RoutingErrorCounter("ids", "[0, 128)"))
    blocks = BlockTable(torch.zeros(table_words(table.capacity, plan.block_m), dtype=torch.int32), table.capacity, pairs, plan.block_m)
    w13, w2 = torch.empty(128, 2 * 768, 2048, dtype=torch.bfloat16), torch.empty(128, 2048, 768, dtype=torch.bfloat16)
    x, out = torch.empty(tokens, 2048, dtype=torch.bfloat16), torch.empty(tokens, 2048, dtype=torch.bfloat16)
    rows = table if plan.pair_items else blocks
    # 16 tokens: 128 pairs, each of 128 experts padded to 16 rows: 2048 rows, 128 blocks of 12 column tiles
    state = torch.zeros(tokens * 2048, dtype=torch.int32), torch.zeros(2, dtype=torch.int32), out
    grid, args, constexprs = ws_decode_args(plan, x, weight_descriptors(w13, w2), torch.empty(pairs), rows, 768, 8, *state, sms)
    assert grid == (programs,) and constexprs["PAIR_ITEMS"] == plan.pair_items and constexprs["GUARD"] == plan.pair_items
    assert decode_launcher(tuple(constexprs.items())).cooperative  # the programs meet at a grid barrier before the cast
    with pytest.raises(AssertionError):  # a plan and a table of the other kind
        ws_decode_args(plan, x, weight_descriptors(w13, w2), torch.empty(pairs), blocks if plan.pair_items else table, 768, 8, *state, sms)


class _RecordedLauncher:
    """Stands for the decode layer's Launcher: keeps each launch (as ``recording()`` lists them) and gives a direct
    launch that keeps each call."""

    def __init__(self):
        self.launches, self.calls = [], []

    def __call__(self, grid, *args):
        self.launches.append((self, grid, args))

    def direct(self, grid, args):
        from moe_core_triton.launch import DirectLaunch

        return DirectLaunch(lambda *call: self.calls.append(call), (*grid, 1, 1)[:3], (), ())


@pytest.mark.skipif(ws_spec.installed_triton_reason() is not None,
                    reason=f"the Gluon layer imports with triton 3.6 only: {ws_spec.installed_triton_reason()}")
def test_a_one_token_forward_can_be_recorded_and_replayed_with_new_inputs(monkeypatch):
    """Every tensor the decode launch takes is an input, the output, a weight (its descriptors' base) or words kept
    for the stream: an eager forward's record (replay.py) holds, and a replay passes the new inputs' pointers and
    descriptors made anew on the weights it is given."""
    from moe_core.quant import scheme as quant_scheme
    from moe_core.routing_guard import RoutingErrorCounter
    from moe_core.presets import random_layer
    from moe_core_triton import ws_decode
    from moe_core_triton.blocks import pair_table
    from moe_core_triton.replay import Replay

    cfg = dataclasses.replace(QWEN3, num_experts=8, top_k=2, hidden_size=256, intermediate_size=128)
    launcher = _RecordedLauncher()
    monkeypatch.setattr(ws_decode, "decode_launcher", lambda constexprs: launcher)
    weights = random_layer(cfg, quant_scheme("unquantized"))
    errors = RoutingErrorCounter("topk_ids", "[0, 8)")

    def forward(x, routing):
        plan = decode_plan(1, cfg.hidden_size, cfg.intermediate_size, 2)
        table = pair_table(routing.topk_ids, 8, 8, plan.block_m, None, errors)
        return ws_decode.ws_decode_layer(plan, x, ws_decode.weight_descriptors(weights.w13, weights.w2), routing.topk_weights, table,
                                         cfg.intermediate_size, cfg.top_k)

    x, routing = random_inputs(cfg, 1, device="cpu")
    inputs = (x, routing.topk_ids, routing.topk_weights, None)
    out = forward(x, routing)
    replay = Replay.record(launcher.launches, weights, inputs, out, kept=(errors.buffer(x.device),))
    assert replay is not None
    x2, routing2 = random_inputs(cfg, 1, device="cpu", seed=5)
    replayed = replay(weights, (x2, routing2.topk_ids, routing2.topk_weights, None), 0)
    call, (_, _, recorded_args) = launcher.calls[-1], launcher.launches[0]
    assert call[4] == x2.data_ptr() and call[5].base is weights.w13 and call[6].base is weights.w2
    assert call[5] == recorded_args[1] and call[5] is not recorded_args[1]  # made anew, equal fields (the layout too)
    assert routing2.topk_ids.data_ptr() in call and replayed.data_ptr() in call and out.data_ptr() not in call


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability() != ws_spec.ARCHITECTURE
                    or ws_spec.installed_triton_reason() is not None, reason="the Gluon layer runs on an sm_90 GPU with triton 3.6")
def test_replayed_eager_forwards_agree_with_full_forwards_and_the_reference(monkeypatch):
    """Eager forwards of the Gluon layer are replayed from the record of an earlier one (direct launches, its weight
    descriptors made anew), at 1 token and with block tables; gluon_check's ``replay`` step says how."""
    from moe_core_triton import gluon_check, ws_decode

    counter = gluon_check._CountingLayer()
    monkeypatch.setattr(ws_decode, "ws_decode_layer", counter)
    result = gluon_check.check_replay(counter)
    assert result["replays"] == 2 * len(gluon_check.REPLAY_TOKENS)
