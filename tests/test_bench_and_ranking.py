"""moe-core bench on the CPU (reference, fake slow/fast backends, a wrong backend) and measured rankings."""

import dataclasses
import json
import time

import pytest
import torch

from moe_core import quant
from moe_core.bench import harness
from moe_core.cli import main
from moe_core.config import MoEConfig
from moe_core.errors import RankingFileError
from moe_core.hookspecs import hookimpl
from moe_core.layer import MoELayer
from moe_core.platform import DeviceKind, preset
from moe_core.presets import random_layer
from moe_core.ranking import Ranking, ranking_from_results, use_ranking
from moe_core.reference.kernel import ReferenceKernel
from moe_core.registry import Registry
from moe_core.resolver import select
from moe_core.routing import Routing
from moe_core.selection import SelectionSource
from moe_core.spec import BackendSpec

CFG = MoEConfig(num_experts=4, top_k=2, hidden_size=32, intermediate_size=16, dtype=torch.float32)
UNQ = quant.scheme("unquantized")
CPU = preset("cpu")
#: The fake kernels' deliberate delay: far above the reference compute at these sizes even on a loaded 2-core CI machine.
SLEEP_S = 0.06


class SlowKernel(ReferenceKernel):
    """Correct but slow: sleeps SLEEP_S above 2 tokens."""

    backend_name = "slowpoke"

    def forward(self, hidden_states, weights, routing, **kw):
        if hidden_states.shape[0] > 2:
            time.sleep(SLEEP_S)
        return super().forward(hidden_states, weights, routing, **kw)


class FastKernel(ReferenceKernel):
    """Correct but slow for 1-2 tokens, fast above."""

    backend_name = "speedy"

    def forward(self, hidden_states, weights, routing, **kw):
        if hidden_states.shape[0] <= 2:
            time.sleep(SLEEP_S)
        return super().forward(hidden_states, weights, routing, **kw)


class WrongKernel(ReferenceKernel):
    backend_name = "wrong"

    def forward(self, hidden_states, weights, routing, **kw):
        return super().forward(hidden_states, weights, routing, **kw) * 1.5


def spec(name, prio, kernel):
    return BackendSpec(name=name, family="fakes", priority=prio, schemes=[UNQ], kernel=kernel, devices={DeviceKind.CPU})


class Fakes:
    @hookimpl
    def moe_core_backends(self):
        return [spec("slowpoke", 300, SlowKernel), spec("speedy", 200, FastKernel), spec("wrong", 900, WrongKernel)]


@pytest.fixture
def reg():
    r = Registry(autoload=False, environ={})
    r.register(Fakes(), name="fakes")
    return r


@pytest.fixture(autouse=True)
def _no_ranking():
    use_ranking(None)
    yield
    use_ranking(None)


def bench(reg, tokens=(1, 8)):
    req = harness.BenchRequest(CFG, UNQ, tokens, peers=("reference",), input_sets=2, label="tiny")
    return harness.run(req, reg, CPU, torch.device("cpu"), timer=harness.Timer("cpu", cpu_repeats=3))


def test_wrong_backend_is_marked_failed_and_never_timed(reg):
    res = bench(reg)
    wrong = [r for r in res.rows if r.backend == "wrong"]
    assert all(r.status == "failed" and r.time_s is None and "differs from the reference" in r.detail for r in wrong)
    ok = [r for r in res.rows if r.backend in ("slowpoke", "speedy", "reference")]
    assert all(r.status == "ok" and r.time_s > 0 and r.rel_err < 1e-5 for r in ok)
    assert {r.kind for r in res.rows if r.backend == "reference"} == {"peer"}
    assert all(r.mode == "eager" and r.eager_time_s == r.time_s and r.graph_b2b_time_s is None for r in ok)  # no graphs on a CPU
    assert all(r.idle_time_s is None and r.graph_idle_time_s is None for r in res.rows)  # no GPU record on a CPU
    table = harness.format_table([res])
    assert "failed" in table and "graph b2b" in table.splitlines()[1] and "idle e / g" in table.splitlines()[1]


def test_ranking_orders_the_fake_pair_and_changes_the_choice(reg, tmp_path):
    res = bench(reg)
    ranking = ranking_from_results([res])
    small, large = ranking.entries
    assert (small.tokens_min, small.tokens_max, large.tokens_min, large.tokens_max) == (1, 2, 3, 8)
    assert small.order.index("slowpoke") < small.order.index("speedy")
    assert large.order.index("speedy") < large.order.index("slowpoke")
    assert "wrong" not in small.order + large.order  # failed rows are never ranked
    assert "reference" in small.order  # a registered backend, though timed as a peer
    path = tmp_path / "ranking.json"
    ranking.save(path)
    env = {"MOE_CORE_RANKING_FILE": str(path), "MOE_CORE_DISABLE": "wrong,reference"}
    static = select(CFG, platform=CPU, registry=reg, environ=env)
    assert static.name == "slowpoke" and static.source is SelectionSource.PRIORITY
    measured = select(CFG, platform=CPU, registry=reg, environ=env, num_tokens=6)
    assert measured.name == "speedy" and measured.source is SelectionSource.RANKING
    assert "measured fastest for this token count" in measured.explain()
    assert select(CFG, platform=CPU, registry=reg, environ=env, num_tokens=2).name == "slowpoke"
    assert select(CFG, platform=CPU, registry=reg, environ=env, num_tokens=50).name == "slowpoke"  # outside the buckets
    other_shape = dataclasses.replace(CFG, hidden_size=64)
    assert select(other_shape, platform=CPU, registry=reg, environ=env, num_tokens=6).name == "slowpoke"
    # The ranking never overrides an explicit request, nor picks an excluded backend.
    requested = dataclasses.replace(CFG, moe_backend="slowpoke")
    assert select(requested, platform=CPU, registry=reg, environ=env, num_tokens=6).name == "slowpoke"
    assert select(CFG, platform=CPU, registry=reg, environ={**env, "MOE_CORE_DISABLE": "wrong,reference,speedy"}, num_tokens=6).name == "slowpoke"


def test_layer_follows_the_ranking_per_call(reg):
    res = bench(reg)
    use_ranking(ranking_from_results([res]))
    layer = MoELayer(CFG, random_layer(CFG, UNQ), platform=CPU, registry=reg, environ={"MOE_CORE_DISABLE": "wrong,reference"})
    x = torch.randn(6, 32)
    ran = []
    for kernel, _ in (layer._kernel(name) for name in ("slowpoke", "speedy")):
        kernel.forward = (lambda f, n: lambda *a, **kw: ran.append(n) or f(*a, **kw))(kernel.forward, kernel.backend_name)
    layer(x, Routing.from_logits(torch.randn(6, 4), 2))
    assert ran == ["speedy"]  # measured faster at 6 tokens; the static priority prefers slowpoke


@pytest.mark.parametrize(
    "doc,msg",
    [
        ([], "top level must be a JSON object"),
        ({"format": "v0", "device": "x", "entries": []}, "'format' must be 'moe-core-ranking/1'"),
        ({"format": "moe-core-ranking/1", "entries": []}, "'device' must be a string"),
        ({"format": "moe-core-ranking/1", "device": "x", "entries": {}}, "'entries' must be a list"),
        ({"format": "moe-core-ranking/1", "device": "x", "entries": [{"num_experts": 4}]}, r"entries\[0\] lacks dtype"),
        ({"format": "moe-core-ranking/1", "device": "x", "entries": [{"num_experts": "4", "top_k": 2, "hidden_size": 1, "intermediate_size": 1, "dtype": "x", "scheme": "s", "tokens_min": 1, "tokens_max": 2, "order": ["a"]}]}, r"entries\[0\].num_experts must be int"),
        ({"format": "moe-core-ranking/1", "device": "x", "entries": [{"num_experts": 4, "top_k": 2, "hidden_size": 1, "intermediate_size": 1, "dtype": "x", "scheme": "s", "tokens_min": 3, "tokens_max": 2, "order": ["a"]}]}, "tokens_min <= tokens_max"),
        ({"format": "moe-core-ranking/1", "device": "x", "entries": [{"num_experts": 4, "top_k": 2, "hidden_size": 1, "intermediate_size": 1, "dtype": "x", "scheme": "s", "tokens_min": 1, "tokens_max": 2, "order": ["a", "a"]}]}, "distinct backend names"),
    ],
)
def test_ranking_validation(doc, msg):
    with pytest.raises(RankingFileError, match=msg):
        Ranking.from_dict(doc, "f.json")


def test_ranking_file_errors(tmp_path, reg):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(RankingFileError, match="not valid JSON"):
        Ranking.load(bad)
    with pytest.raises(RankingFileError, match="cannot read the ranking file"):
        select(CFG, platform=CPU, registry=reg, environ={"MOE_CORE_RANKING_FILE": str(tmp_path / "missing.json")}, num_tokens=4)


def test_cli_bench_on_cpu_writes_json_csv_and_ranking(tmp_path, capsys):
    out = tmp_path / "b.json"
    rank = tmp_path / "r.json"
    csv = tmp_path / "b.csv"
    code = main(["bench", "--preset", "tiny", "--dtype", "float32", "--tokens", "1,4", "--quiet", "--input-sets", "2",
                 "--json", str(out), "--csv", str(csv), "--write-ranking", str(rank)])
    assert code == 0
    table = capsys.readouterr().out
    assert "reference*" in table and "tokens" in table and "ceilings: copy" in table
    doc = json.loads(out.read_text())
    assert doc["cases"][0]["rows"] and doc["environment"]["torch"] == torch.__version__
    assert csv.read_text().startswith("scheme,")
    Ranking.load(rank)


def test_cli_bench_runs_batched_backends_on_dispatched_inputs(tmp_path, capsys):
    out = tmp_path / "b.json"
    code = main(["bench", "--preset", "tiny", "--dtype", "float32", "--batched", "--tokens", "1,5", "--quiet", "--input-sets", "2",
                 "--backends", "reference", "--peers", "torch_grouped_mm", "--json", str(out)])
    assert code == 0
    rows = json.loads(out.read_text())["cases"][0]["rows"]
    ref = [r for r in rows if r["backend"] == "reference"]
    assert [r["status"] for r in ref] == ["ok", "ok"] and all(r["rel_err"] == 0 for r in ref)
    peer = [r for r in rows if r["backend"] == "torch_grouped_mm"]
    assert peer and all(r["status"] == "unsupported" and "standard activation format only" in r["detail"] for r in peer)


def test_roofline_bytes_count_codes_scales_and_zero_points():
    from moe_core.bench.roofline import work

    cfg = MoEConfig(num_experts=4, top_k=1, hidden_size=256, intermediate_size=128, dtype=torch.bfloat16)
    routing = Routing(torch.tensor([[0], [1]], dtype=torch.int32), torch.ones(2, 1))
    base = work(cfg, None, routing).bytes - 2 * 3 * 256 * 128 * 2  # activations and routing only
    per_expert = {name: (work(cfg, quant.scheme(name).weight_key, routing).bytes - base) / 2 for name in ("w4a16", "w4a16-zp", "mxfp4", "nvfp4-w4a16", "fp8-block")}
    codes4 = 3 * 256 * 128 / 2
    # w13 [256, 256] and w2 [256, 128]: groups of 128 along K -> 512 + 256 float32 scales
    assert per_expert["w4a16"] == codes4 + (256 * 2 + 256 * 1) * 4
    assert per_expert["w4a16-zp"] == codes4 + (256 * 2 + 256 * 1) * 5
    assert per_expert["mxfp4"] == codes4 + (256 * 8 + 256 * 4) * 1  # e8m0 bytes per 32
    assert per_expert["nvfp4-w4a16"] == codes4 + (256 * 16 + 256 * 8) * 1 + 2 * 4  # e4m3 per 16, two global scales
    assert per_expert["fp8-block"] == 3 * 256 * 128 + (2 * 2 + 2 * 1) * 4  # 128x128 blocks


def test_the_roofline_of_cycled_input_sets_is_their_mean_work():
    """Sets touching 1 and 2 experts, timed in turn: the bytes are those of 1.5 experts, not the first set's."""
    from moe_core.bench.roofline import mean_work, work

    cfg = MoEConfig(num_experts=4, top_k=2, hidden_size=256, intermediate_size=128, dtype=torch.bfloat16)
    one = Routing(torch.tensor([[0, 0]], dtype=torch.int32), torch.ones(1, 2))
    two = Routing(torch.tensor([[0, 3]], dtype=torch.int32), torch.ones(1, 2))
    mean = mean_work(cfg, None, [one, two])
    assert mean.touched_experts == 1.5 and work(cfg, None, one).touched_experts == 1
    assert mean.bytes == (work(cfg, None, one).bytes + work(cfg, None, two).bytes) / 2
    assert mean.bytes - work(cfg, None, one).bytes == 3 * 256 * 128 * 2 / 2  # half an expert's weights more
    assert mean.flops == work(cfg, None, one).flops  # flops count pairs, which the sets share


def test_the_graph_time_of_cycled_input_sets_is_the_mean_of_each_set_s_time():
    """Two sets whose replays take 3 and 4 units: 3.5, where a median over replays cycling 3, 4, 3 would say 3."""
    from moe_core.bench.harness import graph_time

    class Graph:
        def __init__(self, seconds):
            self.seconds = seconds

        def replay(self):
            return self.seconds

    class Timer:
        def time(self, fn):
            return fn()

    assert graph_time(Timer(), [Graph(3.0), Graph(4.0)]) == 3.5
    assert graph_time(Timer(), [Graph(3.0), Graph(4.0), Graph(3.0)]) == pytest.approx(10 / 3)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the back-to-back eager time uses CUDA events")
def test_eager_time_counts_host_work_that_outlasts_the_gpu_work():
    """A call that spends 300 µs on the host to launch 1 µs of GPU work takes >= 300 µs per call back to back,
    as a model running it eagerly sees; the graph timing's L2 flush before each call would hide most of it."""
    x = torch.ones(16, device="cuda")

    def host_bound():
        end = time.perf_counter() + 300e-6
        while time.perf_counter() < end:
            pass
        x.add_(1)

    assert harness.Timer("cuda").back_to_back(host_bound) >= 290e-6


def test_paired_batches_alternate_and_give_each_callable_its_median_per_call():
    """Timer.back_to_back_pair's rounds: one batch of each callable in turn, so a clock that drifts during the run
    meets both alike; each result is the median of its own batches, per call."""
    from moe_core.bench.timing import alternating_batches

    order, clock = [], iter([30.0, 8.0, 10.0, 9.0, 20.0, 7.0])  # seconds per batch, in the order the batches run

    def batch_seconds(fn, calls):
        order.append((fn, calls))
        return next(clock)

    calls = {"eager": 10, "graph": 4}
    per_call = alternating_batches(["eager", "graph"], batch_seconds, calls.__getitem__, batches=3)
    assert order == [("eager", 10), ("graph", 4)] * 3
    assert per_call == [2.0, 2.0]  # medians of (3.0, 1.0, 2.0) and (2.0, 2.25, 1.75)


def test_a_paired_eager_call_that_outlasts_its_graph_replay_shows_its_host_work():
    """On a CPU each side of the pair is the wall-clock median of its own calls."""
    timer = harness.Timer("cpu", cpu_repeats=3)
    slow, fast = timer.back_to_back_pair(lambda: time.sleep(3e-3), lambda: None)
    assert slow >= 3e-3 > fast


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs")
def test_graph_rows_carry_the_paired_back_to_back_replay_time():
    x = torch.ones(1 << 20, device="cuda")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        x.mul_(1.0)

    def host_bound():
        end = time.perf_counter() + 1e-3
        while time.perf_counter() < end:
            pass
        x.mul_(1.0)

    # A replay of this 4 MB multiply takes a few microseconds on an idle GPU; the margin leaves room for the
    # kernels of other test processes sharing the GPU (the suite runs in parallel on a GPU machine).
    eager, replays = harness.Timer("cuda").back_to_back_pair(host_bound, graph.replay)
    assert eager >= 0.99e-3 > 3 * replays


def test_eager_time_on_a_cpu_is_the_wall_clock_median():
    calls = []
    assert harness.Timer("cpu", cpu_repeats=3).back_to_back(lambda: calls.append(time.sleep(2e-3))) >= 2e-3
    assert len(calls) == 4  # one warm-up, then the repeats


@pytest.mark.skipif(not torch.cuda.is_available(), reason="cold_l2_seconds times CUDA work")
def test_the_l2_is_emptied_by_reading_so_no_run_writes_back_another_s_lines():
    """Timer("cuda").time empties the L2 before each run by reading a buffer larger than any L2, never writing it
    (the buffer keeps its contents), and times what the function enqueues."""
    from moe_core.bench import timing

    x = torch.ones(1 << 20, device="cuda")
    calls = []

    def work():
        calls.append(1)
        x.add_(1)

    seconds = harness.Timer("cuda").time(work)
    flush = timing._FLUSH_BUFFERS[torch.cuda.current_device()]
    assert flush.numel() * 4 == timing.FLUSH_BYTES >= 4 * torch.cuda.get_device_properties(0).L2_cache_size
    assert bool((flush == 1).all())  # read, not written
    assert 0 < seconds < 1e-3 and len(calls) >= 10 and float(x[0]) == 1 + len(calls)


def test_idle_per_call_is_the_span_less_the_busy_time_over_the_calls():
    """timing.idle_per_call: gaps between GPU activities count, the activities themselves do not, overlapping ones
    count once, and the order they are given in does not matter."""
    from moe_core.bench.timing import idle_per_call

    back_to_back = [(0.0, 5.0), (5.0, 3.0), (8.0, 2.0)]
    assert idle_per_call(back_to_back, 2) == 0.0
    gaps = [(10.0, 2.0), (0.0, 4.0), (5.0, 3.0)]  # idle 4..5 and 8..10, given out of order
    assert idle_per_call(gaps, 3) == pytest.approx(1.0)
    overlapping = [(0.0, 6.0), (2.0, 2.0), (5.0, 3.0), (9.0, 1.0)]  # busy 0..8 and 9..10
    assert idle_per_call(overlapping, 1) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="at least one call"):
        idle_per_call([], 1)
    with pytest.raises(ValueError, match="at least one call"):
        idle_per_call(back_to_back, 0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the GPU's record")
def test_the_gpu_idle_of_host_bound_calls_is_their_host_work_and_graph_replays_have_almost_none():
    x = torch.ones(1 << 20, device="cuda")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(20):
            x.mul_(1.0)

    def host_bound():
        for _ in range(20):
            end = time.perf_counter() + 50e-6
            while time.perf_counter() < end:
                pass
            x.mul_(1.0)

    from moe_core.bench.timing import gpu_idle_time

    assert gpu_idle_time(host_bound) >= 20 * 40e-6
    assert gpu_idle_time(graph.replay) < 20 * 10e-6
