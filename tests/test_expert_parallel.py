"""Expert parallelism on CPU: every built-in dispatcher over gloo, world sizes 2 and 4, equals the
single-process reference on the same weights (moe_core.testing.expert_parallel), plus the layer's
contract around it. The GPU run of the same cases with NCCL and the Triton experts is
benchmarks/ep_gpu.py (docs/benchmarks/ep-h200x2.md)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from moe_core import ExpertParallelGroup, MoEConfig, MoELayer, ParallelConfig, Registry, Routing, select_pair
from moe_core.dispatch.builtin import SPECS
from moe_core.errors import InvalidConfigError, KernelInputError
from moe_core.numerics import tolerance
from moe_core.platform import DeviceKind, preset
from moe_core.presets import random_layer
from moe_core.quant import scheme
from moe_core.testing.distributed import spawn_group
from moe_core.testing.expert_parallel import EPCase, check_dispatch_specs, run_cases

#: Every built-in dispatcher that runs on CPUs (the others say why not: test_ep_dispatchers.py).
DISPATCHERS = [s.name for s in SPECS if DeviceKind.CPU in s.devices]
#: Those of them that can send fp8-block layers' hidden states as fp8 rows (ExpertParallelGroup.fp8_dispatch).
FP8_ROWS = [s.name for s in SPECS if DeviceKind.CPU in s.devices and s.load().fp8_rows]


def cases(world: int) -> list[EPCase]:
    out = []
    for d in DISPATCHERS:
        uneven = tuple(3 + 4 * r for r in range(world))
        out += [
            EPCase(f"{d}/random", d, tokens=uneven),
            EPCase(f"{d}/skewed", d, tokens=uneven, routing="skewed"),
            EPCase(f"{d}/experts-without-tokens", d, tokens=uneven, routing="two_experts"),
            EPCase(f"{d}/rank-without-tokens", d, tokens=(9, 0, 5, 0)[:world]),
            EPCase(f"{d}/top1", d, tokens=uneven, top_k=1),
            EPCase(f"{d}/top8", d, tokens=uneven, top_k=8),
            EPCase(f"{d}/bf16", d, tokens=uneven, dtype=torch.bfloat16),
            EPCase(f"{d}/fp8-block", d, tokens=uneven, scheme="fp8-block", hidden=128, intermediate=128, dtype=torch.bfloat16),
            EPCase(f"{d}/fixed-buffers", d, tokens=uneven, max_tokens_per_rank=16),
            EPCase(f"{d}/invalid-id", d, tokens=uneven, invalid_id=True),
            EPCase(f"{d}/two-micro-batches", d, tokens=(9, 0, 1, 6)[:world], micro_batches=2),
            EPCase(f"{d}/two-micro-batches-fixed-buffers", d, tokens=uneven, max_tokens_per_rank=15, micro_batches=2),
            EPCase(f"{d}/two-micro-batches-invalid-id", d, tokens=uneven, invalid_id=True, micro_batches=2),
        ]
    for d in FP8_ROWS:
        uneven = tuple(3 + 4 * r for r in range(world))
        fp8 = dict(scheme="fp8-block", hidden=256, intermediate=128, dtype=torch.bfloat16, fp8_dispatch=True)
        out += [
            EPCase(f"{d}/fp8-rows", d, tokens=uneven, **fp8),
            EPCase(f"{d}/fp8-rows-skewed-fixed-buffers", d, tokens=uneven, routing="skewed", max_tokens_per_rank=16, **fp8),
            EPCase(f"{d}/fp8-rows-two-micro-batches", d, tokens=(9, 0, 1, 6)[:world], micro_batches=2, **fp8),
        ]
    out.append(EPCase("batched_all_to_all/overflow", "batched_all_to_all", tokens=(6,), routing="two_experts", expert_capacity=2))
    out.append(EPCase("batched_all_to_all/capacity-that-fits", "batched_all_to_all", tokens=(2,), routing="two_experts", expert_capacity=2))
    return out


@pytest.fixture(scope="module", params=[2, 4], ids=["world2", "world4"])
def world(request):
    """Every case run once per world size in one spawned gloo group: (world size, cases, per-rank results)."""
    size = request.param
    return size, {c.name: c for c in cases(size)}, spawn_group(size, run_cases, "gloo", cases(size))


@pytest.mark.parametrize("kind", ["random", "skewed", "experts-without-tokens", "rank-without-tokens", "top1", "top8", "bf16",
                                  "fp8-block", "fixed-buffers", "two-micro-batches", "two-micro-batches-fixed-buffers"])
@pytest.mark.parametrize("dispatcher", DISPATCHERS)
def test_expert_parallel_equals_the_single_process_reference(world, dispatcher, kind):
    size, _, results = world
    for rank in range(size):
        got = results[rank][f"{dispatcher}/{kind}"]
        assert (got.dispatcher, got.experts) == (dispatcher, "reference")
        assert got.ok, f"rank {rank}: {got}"


@pytest.mark.parametrize("case", ["invalid-id", "two-micro-batches-invalid-id"])
@pytest.mark.parametrize("dispatcher", DISPATCHERS)
def test_an_invalid_id_is_dropped_and_reported_by_the_rank_that_routed_it(world, dispatcher, case):
    size, _, results = world
    got = [results[r][f"{dispatcher}/{case}"] for r in range(size)]
    assert got[0].raised.startswith("InvalidRoutingError") and "1 value(s)" in got[0].raised
    assert all(not g.raised for g in got[1:])
    assert all(g.shape_ok and g.error <= g.budget for g in got), got  # the other pairs are exact


def test_capacity_overflow_is_reported_never_silent(world):
    size, case, results = world
    for rank in range(size):
        got = results[rank]["batched_all_to_all/overflow"]
        # 6 tokens x top-2 over experts {0, E-1}: each of the two experts gets 6 pairs from each rank, 4 over capacity 2
        assert got.raised.startswith("ExpertCapacityError") and "8 (token, expert) pair(s)" in got.raised, got
        assert "needed 6 rows" in got.raised
        fits = results[rank]["batched_all_to_all/capacity-that-fits"]
        assert fits.ok, fits


def test_the_reference_comparison_can_fail(world):
    """The oracle is not vacuous: a result above its budget or of the wrong shape is not ok."""
    size, _, results = world
    got = results[0][f"{DISPATCHERS[0]}/bf16"]
    assert 0 < got.error <= got.budget  # bf16 rounding is visible, so the comparison computes something
    assert not dataclasses.replace(got, error=got.budget * 2).ok and not dataclasses.replace(got, shape_ok=False).ok


# ---------------------------------------------------------------------------------------------- contract


def _ep_cfg(**parallel) -> MoEConfig:
    return MoEConfig(8, 2, 64, 32, dtype=torch.float32, parallel=ParallelConfig(ep_size=2, **parallel))


def test_explain_shows_both_tables_and_the_pair():
    pair = select_pair(_ep_cfg(), platform=preset("cpu"), registry=Registry(autoload=False), environ={})
    text = pair.explain()
    assert "Dispatchers (expert-parallel size 2)" in text and "Experts backends for the standard format" in text
    assert "Experts backends for the batched_experts format" in text
    assert "=> pair: all_to_all + reference (standard)" in text
    assert pair.to_dict()["dispatcher"] == "all_to_all" and pair.to_dict()["format"] == "standard"


def test_batched_only_layers_pair_with_the_batched_dispatcher():
    pair = select_pair(_ep_cfg(use_batched_activation_format=True), platform=preset("cpu"), registry=Registry(autoload=False), environ={})
    assert pair.dispatcher.name == "batched_all_to_all" and pair.config.parallel.use_batched_activation_format
    rows = {c.name: c for c in pair.dispatchers}
    assert rows["naive"].status.value == "excluded: policy" and "use_batched_activation_format" in rows["naive"].note


def test_a_layer_without_a_process_group_says_how_to_start_one():
    weights = random_layer(MoEConfig(8, 2, 64, 32, dtype=torch.float32), scheme("unquantized")).shard(0, 2)
    with pytest.raises(InvalidConfigError, match="init_process_group"):
        MoELayer(_ep_cfg(), weights, registry=Registry(autoload=False), environ={})


def test_an_ep_group_on_a_layer_without_expert_parallelism_is_refused():
    cfg = MoEConfig(8, 2, 64, 32, dtype=torch.float32)
    with pytest.raises(KernelInputError, match="not expert-parallel"):
        MoELayer(cfg, random_layer(cfg, scheme("unquantized")), registry=Registry(autoload=False), ep_group=object())


def test_shard_takes_contiguous_experts_with_their_scales():
    cfg = MoEConfig(8, 2, 128, 128, dtype=torch.bfloat16)
    full = random_layer(cfg, scheme("fp8-block"))
    part = full.shard(1, 4)
    assert torch.equal(part.w13.view(torch.uint8), full.w13[2:4].view(torch.uint8)) and torch.equal(part.w2_scale, full.w2_scale[2:4])
    with pytest.raises(KernelInputError, match="shard 4 of 4"):
        full.shard(4, 4)


def test_group_sizes_are_validated():
    with pytest.raises(InvalidConfigError, match="max_tokens_per_rank"):
        ExpertParallelGroup(max_tokens_per_rank=0)


def test_unknown_dispatchers_are_named_with_the_valid_ones():
    from moe_core.errors import InvalidEnvironmentError, UnknownBackendError

    reg = Registry(autoload=False)
    with pytest.raises(UnknownBackendError, match="dispatch_backend='nope' is not a registered dispatcher. Registered dispatchers: all_to_all"):
        select_pair(_ep_cfg(dispatch_backend="nope"), platform=preset("cpu"), registry=reg, environ={})
    with pytest.raises(InvalidEnvironmentError, match="MOE_CORE_DISPATCH='nope'"):
        select_pair(_ep_cfg(), platform=preset("cpu"), registry=reg, environ={"MOE_CORE_DISPATCH": "nope"})


def test_routing_shape_mismatch_fails_before_any_collective():
    from moe_core.dispatch.naive import NaiveDispatcher

    class _Group:
        rank, world_size, group, max_tokens_per_rank, expert_capacity = 0, 2, None, None, None

    d = NaiveDispatcher(_ep_cfg(), _Group())
    x = torch.zeros(3, 64)
    with pytest.raises(KernelInputError, match="expected \\[3, 2\\]"):
        d.check_inputs(x, Routing(torch.zeros(3, 1, dtype=torch.int32), torch.ones(3, 1)))


def test_the_builtin_dispatchers_pass_the_conformance_declaration_checks():
    check_dispatch_specs(Registry(autoload=False), "torch_distributed")


def test_a_dispatcher_whose_class_lies_about_its_format_fails_conformance():
    from moe_core import hookimpl
    from moe_core.config import ActivationFormat

    lying = dataclasses.replace(SPECS[0], name="liar", output_format=ActivationFormat.BATCHED_EXPERTS)

    class Liar:
        @hookimpl
        def moe_core_dispatchers(self):
            return [lying]

    reg = Registry(autoload=False, builtin=False)
    reg.register(Liar(), name="liar")
    with pytest.raises(AssertionError, match="produces ActivationFormat.STANDARD, the spec says"):
        check_dispatch_specs(reg, "liar")


def test_cli_explains_the_pair_and_run_says_how_to_launch(capsys):
    from moe_core.cli import main

    assert main(["explain", "--ep", "2", "--experts", "16", "--platform", "h100", "--dispatch", "naive"]) == 0
    out = capsys.readouterr().out
    assert "=> pair: naive + " in out and "Dispatchers (expert-parallel size 2)" in out
    assert main(["run", "--ep", "2", "--experts", "16", "--tokens", "4", "--device", "cpu"]) == 2
    assert "torchrun --standalone --nproc-per-node 2" in capsys.readouterr().err


def test_moe_core_run_under_torchrun_runs_every_rank(tmp_path):
    import os
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m", "moe_core.cli",
           "run", "--ep", "2", "--experts", "16", "--hidden", "256", "--intermediate", "128", "--tokens", "8", "--device", "cpu"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "=> pair: all_to_all + " in result.stdout
    assert "rank 0 of 2" in result.stdout and "rank 1 of 2" in result.stdout


def _fails_on_rank_1(rank: int, world: int) -> int:
    import torch.distributed as dist

    if rank == 1:
        raise RuntimeError("rank 1 failed on purpose")
    dist.barrier()  # rank 0 would wait here forever if a failed peer were not noticed
    return rank


def test_a_failing_rank_fails_the_group_at_once():
    """The error raised is the first rank's to end: the failing one, or its peer whose collective it broke."""
    import time

    from torch.multiprocessing import ProcessRaisedException

    start = time.monotonic()
    with pytest.raises(ProcessRaisedException, match="_fails_on_rank_1"):  # either traceback runs through it
        spawn_group(2, _fails_on_rank_1, "gloo", timeout_s=60)
    assert time.monotonic() - start < 30  # the other rank is terminated, not left to its 60 s timeout


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="NCCL needs a GPU per rank")
def test_a_failing_nccl_rank_fails_the_group_with_its_traceback():
    """An NCCL rank that fails leaves without destroy_process_group (which can wait forever after a failure)."""
    import time

    start = time.monotonic()
    with pytest.raises(RuntimeError, match="rank 1 failed on purpose"):
        spawn_group(2, _fails_on_rank_1, "nccl", timeout_s=60)
    assert time.monotonic() - start < 45


def _naive_padding_targets(rank: int, world: int) -> tuple[list[int], list[float]]:
    from moe_core.dispatch.naive import NaiveDispatcher

    cfg = MoEConfig(8, 2, 16, 8, dtype=torch.float32, parallel=ParallelConfig(ep_size=world))
    dispatcher = NaiveDispatcher(cfg, ExpertParallelGroup(max_tokens_per_rank=4))
    tokens = 1 + rank  # rank 0 pads 3 rows, rank 1 pads 2
    sent = dispatcher.dispatch(torch.randn(tokens, 16), Routing.from_logits(torch.randn(tokens, 8), 2))
    padding = torch.cat([torch.arange(r * 4 + 1 + r, (r + 1) * 4) for r in range(world)])
    local = sent.expert_map[sent.routing.topk_ids[padding].long()]
    return local.flatten().tolist(), sent.routing.topk_weights[padding].flatten().tolist()


def test_naive_padding_rows_cost_no_expert_work():
    for local, weights in spawn_group(2, _naive_padding_targets, "gloo"):
        assert len(local) == 2 * (3 + 2) and set(local) == {-1}  # every padded pair targets a remote expert
        assert set(weights) == {0.0}


@pytest.mark.parametrize("kind", ["fp8-rows", "fp8-rows-skewed-fixed-buffers", "fp8-rows-two-micro-batches"])
@pytest.mark.parametrize("dispatcher", FP8_ROWS)
def test_fp8_rows_give_the_fp8_block_layer_its_own_codes(world, dispatcher, kind):
    """An fp8-block layer whose tokens travel as fp8 rows equals the single-process layer to a 16-bit rounding, far
    inside the fp8 tolerance: the experts quantize the dequantized rows back to the codes that were sent."""
    size, _, results = world
    for rank in range(size):
        got = results[rank][f"{dispatcher}/{kind}"]
        assert (got.dispatcher, got.experts) == (dispatcher, "reference") and got.ok, f"rank {rank}: {got}"
        assert got.error <= tolerance(None, torch.bfloat16), f"rank {rank}: {got}"
