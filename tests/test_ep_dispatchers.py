"""The token-row dispatchers (packed_all_to_all, peer_copy): their slots, their buffers, no host sync, and
peer_copy's honest refusal on CPUs. Their equality with the single-process reference over gloo at world
sizes 2 and 4 runs with every other dispatcher in tests/test_expert_parallel.py."""

from __future__ import annotations

import contextlib

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from moe_core import ExpertParallelGroup, MoEConfig, MoELayer, ParallelConfig, Registry, Routing, select_pair
from moe_core.dispatch.builtin import SPECS
from moe_core.dispatch.packed_all_to_all import PackedAllToAllDispatcher
from moe_core.dispatch.token_rows import ROW_ALIGN, RowLayout
from moe_core.errors import BackendUnsupportedError
from moe_core.platform import DeviceKind, preset
from moe_core.presets import random_layer
from moe_core.quant import scheme
from moe_core.testing.distributed import spawn_group


class _Group:
    """A stand-in for ExpertParallelGroup: the slots are computed without a process group."""

    group, expert_capacity = None, None

    def __init__(self, rank: int, world_size: int, max_tokens_per_rank: int, fp8_dispatch: bool = False):
        self.rank, self.world_size, self.max_tokens_per_rank = rank, world_size, max_tokens_per_rank
        self.fp8_dispatch = fp8_dispatch


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.data())
def test_each_row_carries_its_token_and_the_routing_only_where_its_rank_holds_one_of_the_experts(data):
    ep = data.draw(st.sampled_from([2, 4]), label="ep")
    local = data.draw(st.integers(1, 3), label="local experts")
    experts = ep * local
    k = data.draw(st.integers(1, experts), label="top_k")
    rows = data.draw(st.integers(1, 9), label="rows per destination")
    t = data.draw(st.integers(0, rows), label="tokens")
    ids = [data.draw(st.permutations(range(experts)), label=f"token {i}")[:k] for i in range(t)]
    cfg = MoEConfig(experts, k, 16, 8, dtype=torch.float32, parallel=ParallelConfig(ep_size=ep))
    d = PackedAllToAllDispatcher(cfg, _Group(0, ep, rows))
    bufs = d.buffers(torch.device("cpu"), rows)
    bufs.send.fill_(7)  # a previous forward's bytes: every row must be rewritten or blank
    x = torch.randn(t, 16)
    weights = torch.rand(t, k)
    d.stage_routing(bufs, Routing(torch.tensor(ids, dtype=torch.int64).view(t, k), weights))
    d.pack(bufs)
    d.write_hidden(bufs, x)
    sent_ids, sent_weights = d.layout.ids(bufs.send), d.layout.weights(bufs.send)
    # Oracle, written independently: row dest * rows + token; the token's routing if dest holds one of its experts.
    for dest in range(ep):
        for row in range(rows):
            at = dest * rows + row
            needs = row < t and any(e // local == dest for e in ids[row])
            if needs:
                assert sent_ids[at].tolist() == ids[row] and torch.equal(sent_weights[at], weights[row])
            else:  # blank: every id on another rank, so the receiver's expert map skips the row
                assert all(e // local != dest for e in sent_ids[at].tolist())
            if row < t:
                assert torch.equal(d.layout.hidden(bufs.send, torch.float32)[at], x[row])


@given(hidden=st.integers(1, 8192), top_k=st.integers(1, 16), dtype=st.sampled_from([torch.float32, torch.bfloat16, torch.float16, torch.float8_e4m3fn]))
@settings(max_examples=200, deadline=None, derandomize=True)
def test_the_hidden_states_row_stride_is_a_multiple_of_16_elements(hidden, top_k, dtype):
    layout = RowLayout(hidden_bytes=hidden * dtype.itemsize, top_k=top_k)
    view = layout.hidden(torch.zeros(3, layout.width, dtype=torch.uint8), dtype)
    assert view.shape == (3, hidden) and view.stride(0) % 16 == 0 and layout.width % 128 == 0
    assert layout.ids_at % 8 == 0 and layout.ids_at - hidden * dtype.itemsize < 8  # routing words are int64-aligned
    assert layout.width - (hidden * dtype.itemsize + 8 * top_k) < ROW_ALIGN + 8  # no more padding than that takes
    words = layout.hidden_words(torch.zeros(3, layout.width, dtype=torch.uint8))
    assert words.shape[1] * words.element_size() == hidden * dtype.itemsize


def test_row_layout_is_aligned_and_keeps_hidden_states_first():
    layout = RowLayout(hidden_bytes=2 * 2050, top_k=3)
    assert layout.width % ROW_ALIGN == 0 and layout.width >= 4100 + 24
    rows = torch.zeros(4, layout.width, dtype=torch.uint8)
    layout.ids(rows).copy_(torch.tensor([[1, 2, 3]] * 4))
    layout.weights(rows).copy_(torch.full((4, 3), 0.5))
    layout.hidden(rows, torch.bfloat16).copy_(torch.ones(4, 2050))
    assert layout.hidden(rows, torch.bfloat16).shape == (4, 2050) and layout.hidden(rows, torch.bfloat16).eq(1).all()
    assert layout.ids(rows).tolist() == [[1, 2, 3]] * 4 and layout.weights(rows).eq(0.5).all()
    # The routing as int64 words: the ids, then the weights' bits.
    both = layout.routing_words(rows)[0].view(torch.int32)
    assert both[:3].tolist() == [1, 2, 3] and both[3:].view(torch.float32).eq(0.5).all()


def _two_forwards_without_host_syncs(rank: int, world: int) -> dict:
    """Two forwards of a packed_all_to_all layer with item()/tolist() forbidden: the buffers are the same both times."""
    cfg = MoEConfig(8, 2, 32, 16, dtype=torch.float32, parallel=ParallelConfig(ep_size=world, dispatch_backend="packed_all_to_all"))
    full = random_layer(MoEConfig(8, 2, 32, 16, dtype=torch.float32), scheme("unquantized"), seed=3)
    layer = MoELayer(cfg, full.shard(rank, world), registry=Registry(autoload=False), environ={},
                     ep_group=ExpertParallelGroup(max_tokens_per_rank=8))
    gen = torch.Generator().manual_seed(rank)
    inputs = [(torch.randn(t, 32, generator=gen), Routing.from_logits(torch.randn(t, 8, generator=gen), 2)) for t in (5, 8)]
    synced = []

    @contextlib.contextmanager
    def no_host_sync():
        """item()/tolist() (and so any host read of a device value a dispatcher could make) raise, and are noted."""
        def forbidden(name):
            def call(*args, **kwargs):
                synced.append(name)
                raise AssertionError(f"host sync: {name}")
            return call

        saved = torch.Tensor.item, torch.Tensor.tolist
        torch.Tensor.item, torch.Tensor.tolist = forbidden("item"), forbidden("tolist")
        try:
            yield
        finally:
            torch.Tensor.item, torch.Tensor.tolist = saved

    outs, recv = [], []
    for x, r in inputs:
        with no_host_sync():
            sent = layer.dispatcher.dispatch(x, r)
        recv.append(sent.hidden_states.data_ptr())
        y = layer._run(sent.hidden_states, sent.routing, sent.expert_map, False, x.shape[0])  # the reference experts sync
        with no_host_sync():
            outs.append(layer.dispatcher.combine(y, sent))
    return {"synced": synced, "same_buffers": recv[0] == recv[1], "shapes": [tuple(o.shape) for o in outs]}


def test_packed_all_to_all_reuses_its_buffers_and_never_syncs_with_the_host():
    for got in spawn_group(2, _two_forwards_without_host_syncs, "gloo"):
        assert got == {"synced": [], "same_buffers": True, "shapes": [(5, 32), (8, 32)]}


def test_peer_copy_says_it_does_not_run_on_cpus_and_is_offered_on_gpus():
    cfg = MoEConfig(8, 2, 64, 32, dtype=torch.float32, parallel=ParallelConfig(ep_size=2, dispatch_backend="peer_copy"))
    with pytest.raises(BackendUnsupportedError, match="peer_copy.*cuda"):
        select_pair(cfg, platform=preset("cpu"), registry=Registry(autoload=False), environ={})
    pair = select_pair(cfg, platform=preset("h100"), registry=Registry(autoload=False), environ={})
    assert pair.dispatcher.name == "peer_copy"
    spec = next(s for s in SPECS if s.name == "peer_copy")
    assert spec.devices == frozenset({DeviceKind.CUDA}) and spec.cuda_graph_safe and not spec.host_sync


def test_peer_copy_refuses_cpu_tensors_with_what_to_use_instead():
    from moe_core.dispatch.peer_copy import PeerCopyDispatcher, TransportUnavailableError

    cfg = MoEConfig(8, 2, 16, 8, dtype=torch.float32, parallel=ParallelConfig(ep_size=2))
    d = PeerCopyDispatcher(cfg, _Group(0, 2, 4))
    with pytest.raises(TransportUnavailableError, match="packed_all_to_all"):
        d.buffers(torch.device("cpu"), 4)


class _ReplayCounter:
    """Stands in for a CUDA graph of a step on a CPU: replaying runs the step."""

    def __init__(self, step):
        self.step, self.replays = step, 0

    def replay(self):
        self.replays += 1
        self.step()


class _Loopback(PackedAllToAllDispatcher):
    """A transport without a process group: each rank receives its own send buffer (same on both sides of a test)."""

    def send_rows(self, send, recv):
        recv.copy_(send)


class _GraphedOnCpu(_Loopback):
    """The step-graph bookkeeping of eager GPU forwards, exercised on a CPU with a stand-in graph; ``capturing``
    stands for an outer CUDA-graph capture, under which the steps must run as plain ops (a replay there is an error)."""

    capturing = False

    def _graphable(self, device):
        return not self.capturing

    def _capture(self, bufs, name, step):
        graph = bufs.graphs[name] = _ReplayCounter(step)
        return graph


def _forward(d, x, r):
    sent = d.dispatch(x, r)
    return sent, d.combine(sent.hidden_states * 2, sent)


def _graphed_and_plain(rows: int):
    cfg = MoEConfig(8, 2, 16, 8, dtype=torch.float32, parallel=ParallelConfig(ep_size=2))
    return _GraphedOnCpu(cfg, _Group(0, 2, rows)), _Loopback(cfg, _Group(0, 2, rows))


def test_eager_forwards_replay_both_steps_from_the_second_forward_of_a_buffer_set():
    graphed, plain = _graphed_and_plain(8)
    gen = torch.Generator().manual_seed(0)
    for t in (5, 8, 0, 3, 7):  # any token count: the graphs belong to the buffer set (8 rows), not to the count
        x, r = torch.randn(t, 16, generator=gen), Routing.from_logits(torch.randn(t, 8, generator=gen), 2)
        (gs, gout), (ps, pout) = _forward(graphed, x, r), _forward(plain, x, r)
        assert torch.equal(gout, pout) and torch.equal(gs.routing.topk_ids, ps.routing.topk_ids)
        assert torch.equal(gs.hidden_states, ps.hidden_states) and torch.equal(gs.routing.topk_weights, ps.routing.topk_weights)
    graphs = graphed.buffers(torch.device("cpu"), 8).graphs
    # the first forward runs as ops; the second captures both steps and replays them, as do the three after it
    assert {name: g.replays for name, g in graphs.items()} == {"dispatch": 4, "combine": 4}


def test_under_an_outer_capture_the_steps_run_as_plain_ops_even_where_graphs_exist():
    graphed, plain = _graphed_and_plain(8)
    gen = torch.Generator().manual_seed(1)
    for capturing in (False, False, True, True, False):
        graphed.capturing = capturing
        x, r = torch.randn(5, 16, generator=gen), Routing.from_logits(torch.randn(5, 8, generator=gen), 2)
        assert torch.equal(_forward(graphed, x, r)[1], _forward(plain, x, r)[1])
    # captured and replayed on the second forward, not replayed under the two captures, replayed after them
    graphs = graphed.buffers(torch.device("cpu"), 8).graphs
    assert graphs["dispatch"].replays == graphs["combine"].replays == 2


def test_rows_past_the_forwards_tokens_are_blank_after_a_larger_forward():
    """A forward of fewer tokens than the last must not send the last forward's routing in the rows it leaves."""
    _, d = _graphed_and_plain(8)
    gen = torch.Generator().manual_seed(2)
    d.dispatch(torch.randn(8, 16, generator=gen), Routing.from_logits(torch.randn(8, 8, generator=gen), 2))
    d.dispatch(torch.randn(3, 16, generator=gen), Routing.from_logits(torch.randn(3, 8, generator=gen), 2))
    bufs = d.buffers(torch.device("cpu"), 8)
    sent = d.blocks(d.layout.ids(bufs.send))[:, 3:]
    assert torch.equal(sent, d.blocks(bufs.blank_ids)[:, 3:])


def test_buffer_sets_are_bounded_and_the_oldest_goes_first():
    from moe_core.dispatch import token_rows

    cfg = MoEConfig(8, 2, 16, 8, dtype=torch.float32, parallel=ParallelConfig(ep_size=2))
    d = PackedAllToAllDispatcher(cfg, _Group(0, 2, None))
    made = [d.buffers(torch.device("cpu"), rows) for rows in (1, 2, 4, 8, 16)]
    assert len(d._buffers) == token_rows.MAX_BUFFER_SETS == 4
    assert d.buffers(torch.device("cpu"), 16) is made[-1] and (torch.device("cpu"), 1) not in d._buffers
    assert made[2].send.shape == (2 * 4, d.layout.width)  # N * R rows


class _CapturedOnCpu(PackedAllToAllDispatcher):
    """``capturing`` stands for a CUDA-graph capture of the forwards that ask for buffers."""

    capturing = False

    def _under_capture(self, device):
        return self.capturing


def test_buffer_sets_a_graph_was_captured_with_are_never_dropped_and_none_is_dropped_during_a_capture():
    from moe_core.dispatch import token_rows

    cfg = MoEConfig(8, 2, 16, 8, dtype=torch.float32, parallel=ParallelConfig(ep_size=2))
    d, cpu = _CapturedOnCpu(cfg, _Group(0, 2, None)), torch.device("cpu")
    d.buffers(cpu, 1)
    d.capturing = True
    captured = d.buffers(cpu, 2)
    for rows in (4, 8, 16):  # beyond the bound, but under a capture: nothing is freed
        d.buffers(cpu, rows)
    assert sorted(r for _, r in d._buffers) == [1, 2, 4, 8, 16]
    d.capturing = False
    for rows in (32, 64, 128, 256, 512):  # eager forwards drop the oldest sets, never the captured one
        d.buffers(cpu, rows)
    # The four sets used under the capture stay; of the others, only the newest (the bound allows one more).
    assert d.buffers(cpu, 2) is captured and sorted(r for _, r in d._buffers) == [2, 4, 8, 16, 512]
    assert token_rows.MAX_BUFFER_SETS == 4


def test_peer_copy_delivers_block_d_of_each_sender_to_rank_d_as_all_to_all_does():
    """The copy loop of peer_copy over stand-in symmetric buffers (CPU tensors every "rank" can see, a thread barrier):
    block ``p`` of rank ``r``'s receive buffer is block ``r`` of rank ``p``'s send buffer."""
    import threading

    from moe_core.dispatch.peer_copy import PeerCopyDispatcher

    ep, rows, width = 4, 3, 5
    cfg = MoEConfig(8, 2, 16, 8, dtype=torch.float32, parallel=ParallelConfig(ep_size=ep))
    barrier = threading.Barrier(ep)

    class Handle:
        def barrier(self):
            barrier.wait(timeout=30)

    recv = [torch.zeros(ep * rows, width) for _ in range(ep)]
    send = [torch.arange(ep * rows * width, dtype=torch.float32).view(ep * rows, width) + 1000 * r for r in range(ep)]
    dispatchers = []
    for r in range(ep):
        d = PeerCopyDispatcher(cfg, _Group(r, ep, rows))
        d._peers[recv[r].data_ptr()] = (Handle(), recv)
        dispatchers.append(d)
    threads = [threading.Thread(target=dispatchers[r].send_rows, args=(send[r], recv[r])) for r in range(ep)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    for r in range(ep):
        for p in range(ep):
            assert torch.equal(recv[r][p * rows:(p + 1) * rows], send[p][r * rows:(r + 1) * rows]), (r, p)


def test_wide_ids_outside_int32_are_counted_as_invalid_not_wrapped_into_range():
    from moe_core.routing_guard import InvalidRoutingError

    cfg = MoEConfig(8, 2, 16, 8, dtype=torch.float32, parallel=ParallelConfig(ep_size=2))
    d = _Loopback(cfg, _Group(0, 2, 4))
    # 2**32 + 1 and 1 - 2**32 would wrap to expert 1 as int32
    ids = torch.tensor([[2**32 + 1, 3], [1 - 2**32, 2]], dtype=torch.int64)
    sent = d.dispatch(torch.ones(2, 16), Routing(ids, torch.full((2, 2), 0.5)))
    with pytest.raises(InvalidRoutingError, match="2 value"):
        d.routing_errors.check()
    got = sent.routing.topk_ids[:2].tolist(), sent.routing.topk_weights[:2].tolist()
    assert got == ([[0, 3], [0, 2]], [[0.0, 0.5], [0.0, 0.5]])  # the bad pairs travel to expert 0 with weight 0


class _Threaded(PackedAllToAllDispatcher):
    """One rank of a group of threads: ``send_rows`` exchanges blocks through shared lists and a barrier, as
    ``all_to_all_single`` does between processes (block ``p`` of rank ``r``'s ``recv`` is block ``r`` of rank ``p``'s
    ``send``), so the whole data path runs in one process."""

    def __init__(self, cfg, group, mailbox: list, barrier):
        super().__init__(cfg, group)
        self.mailbox, self.barrier = mailbox, barrier

    def send_rows(self, send, recv):
        ep, rank = self.config.parallel.ep_size, self.group.rank
        self.mailbox[rank] = send
        self.barrier.wait(timeout=30)
        rows = send.shape[0] // ep
        for p in range(ep):
            recv[p * rows:(p + 1) * rows].copy_(self.mailbox[p][rank * rows:(rank + 1) * rows])
        self.barrier.wait(timeout=30)


def _toy_experts(sent) -> torch.Tensor:
    """Expert ``e`` scales a row by ``e + 1``; each row's output is the weighted sum over its pairs whose expert the
    dispatcher's expert map places on this rank."""
    ids, weights = sent.routing.topk_ids.long(), sent.routing.topk_weights
    here = sent.expert_map[ids] >= 0
    return sent.hidden_states * (here * weights * (ids + 1)).sum(1, keepdim=True)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(ep=st.sampled_from([2, 3, 4]), counts=st.lists(st.integers(0, 9), min_size=4, max_size=4), limit=st.sampled_from([None, 9, 12]),
       seed=st.integers(0, 2**16))
def test_dispatch_then_combine_over_threads_gives_each_token_its_weighted_experts(ep, counts, limit, seed):
    """The whole token-rows path in one process (threads stand in for the ranks): every token comes back as the
    weighted sum of its experts' outputs, wherever they live, for any token counts (an empty rank too); rows per
    destination are the limit when set, else the largest count rounded up to a power of two."""
    import threading

    experts, k, hidden = 4 * ep, 3, 8
    cfg = MoEConfig(experts, k, hidden, 8, dtype=torch.float32, parallel=ParallelConfig(ep_size=ep))
    mailbox, barrier = [None] * ep, threading.Barrier(ep)
    ranks = [_Threaded(cfg, _Group(r, ep, limit), mailbox, barrier) for r in range(ep)]
    largest = max(counts[:ep])
    for d in ranks:  # the group's largest count, as the all-reduce of tokens_per_rank would give it
        d.tokens_per_rank = lambda n, device, d=d: d.group.max_tokens_per_rank or max(largest, 1)
    gen = torch.Generator().manual_seed(seed)
    inputs = []
    for r in range(ep):
        t = counts[r]
        ids = torch.stack([torch.randperm(experts, generator=gen)[:k] for _ in range(t)]) if t else torch.zeros(0, k, dtype=torch.int64)
        inputs.append((torch.randn(t, hidden, generator=gen), Routing(ids, torch.rand(t, k, generator=gen))))
    outs, errors = [None] * ep, []

    def run(r):
        try:
            sent = ranks[r].dispatch(*inputs[r])
            outs[r] = ranks[r].combine(_toy_experts(sent), sent)
        except BaseException as exc:  # noqa: BLE001 - re-raised below, in the test's thread
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=run, args=(r,)) for r in range(ep)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    assert not errors, errors
    rows = limit or (1 << (max(largest, 1) - 1).bit_length())
    for r, (x, routing) in enumerate(inputs):
        want = x * (routing.topk_weights * (routing.topk_ids + 1)).sum(1, keepdim=True)
        torch.testing.assert_close(outs[r], want, rtol=1e-5, atol=1e-5)
        bufs = ranks[r]._buffers[(torch.device("cpu"), rows)]
        assert bufs.rows == rows and bufs.send.shape[0] == ep * rows
        # every blank row of destination d names an expert that rank d does not hold
        owners = bufs.blank_ids.view(ep, rows, k).long() // 4
        assert all((owners[d] != d).all() for d in range(ep))


# ---------------------------------------------------------------------------------------------- fp8 rows
def _fp8_values(x: torch.Tensor) -> torch.Tensor:
    """Oracle, written independently of moe_core's quantizer: each run of 128 values along a row (the last one
    shorter) scaled by its largest magnitude / 448, rounded to float8 e4m3, scaled back, in x's dtype."""
    parts = []
    for group in torch.split(x.float(), 128, dim=1):
        scale = group.abs().amax(dim=1, keepdim=True).clamp(min=1e-12) / 448.0
        parts.append((group / scale).to(torch.float8_e4m3fn).float() * scale)
    return torch.cat(parts, dim=1).to(x.dtype) if parts else x


def _fp8_pair(rows: int, hidden: int, dtype: torch.dtype, graphed: bool = False):
    cfg = MoEConfig(8, 2, hidden, 8, dtype=dtype, parallel=ParallelConfig(ep_size=2))
    make = _GraphedOnCpu if graphed else _Loopback
    return make(cfg, _Group(0, 2, rows, fp8_dispatch=True)), _Loopback(cfg, _Group(0, 2, rows))


@settings(max_examples=40, deadline=None, derandomize=True)
@given(hidden=st.sampled_from([128, 320, 1000, 2048]), t=st.integers(0, 6), dtype=st.sampled_from([torch.bfloat16, torch.float16, torch.float32]),
       spread=st.sampled_from([1e-3, 1.0, 1e3]), seed=st.integers(0, 2**16))
def test_fp8_rows_deliver_each_tokens_fp8_group_values_and_the_same_routing(hidden, t, dtype, spread, seed):
    fp8, plain = _fp8_pair(6, hidden, dtype)
    gen = torch.Generator().manual_seed(seed)
    x = (torch.randn(t, hidden, generator=gen) * spread * torch.rand(t, 1, generator=gen)).to(dtype)
    if t:
        x[0, :7] = 0.0  # a group with zeros: no NaN from a zero scale
    r = Routing.from_logits(torch.randn(t, 8, generator=gen), 2)
    got, want = fp8.dispatch(x, r), plain.dispatch(x, r)
    assert got.hidden_states.dtype == dtype and got.hidden_states.shape == (12, hidden)
    for block in range(2):  # rank 0 receives its own two blocks: each holds the tokens in its first t rows
        assert torch.equal(got.hidden_states[block * 6: block * 6 + t], _fp8_values(x)), block
    assert torch.equal(got.routing.topk_ids, want.routing.topk_ids) and torch.equal(got.routing.topk_weights, want.routing.topk_weights)


def test_fp8_rows_move_about_half_the_bytes_of_bf16_rows():
    # DeepSeek-V3: 7168 codes and 56 scales, then 8 ids and 8 weights, against 14336 bytes of bf16 and the routing
    assert RowLayout(7168, 8, 56).width == 7552 and RowLayout(2 * 7168, 8).width == 14464
    fp8, plain = _fp8_pair(4, 7168, torch.bfloat16)  # top 2: 16 bytes of routing
    sizes = [d.buffers(torch.device("cpu"), 4).send.numel() for d in (fp8, plain)]
    assert sizes == [2 * 4 * 7424, 2 * 4 * 14464]


@given(hidden=st.integers(1, 8192), top_k=st.integers(1, 16))
@settings(max_examples=200, deadline=None, derandomize=True)
def test_fp8_row_scales_and_routing_are_aligned_and_disjoint(hidden, top_k):
    groups = -(-hidden // 128)
    layout = RowLayout(hidden, top_k, groups)
    assert layout.scales_at % 4 == 0 and layout.scales_at >= hidden and layout.ids_at % 8 == 0
    assert layout.ids_at >= layout.scales_at + 4 * groups and layout.width % ROW_ALIGN == 0
    rows = torch.zeros(2, layout.width, dtype=torch.uint8)
    layout.hidden(rows, torch.float8_e4m3fn).fill_(1.0)
    layout.scales(rows).fill_(2.0)
    layout.ids(rows).fill_(3)
    layout.weights(rows).fill_(4.0)
    assert layout.hidden(rows, torch.float8_e4m3fn).float().eq(1).all() and layout.scales(rows).eq(2).all()
    assert layout.ids(rows).eq(3).all() and layout.weights(rows).eq(4).all()


def test_fp8_rows_replayed_from_the_step_graph_quantize_each_forwards_own_tokens():
    graphed, _ = _fp8_pair(8, 256, torch.bfloat16, graphed=True)
    gen = torch.Generator().manual_seed(3)
    for t in (5, 8, 2, 7):
        x = torch.randn(t, 256, generator=gen).to(torch.bfloat16)
        sent = graphed.dispatch(x, Routing.from_logits(torch.randn(t, 8, generator=gen), 2))
        assert torch.equal(sent.hidden_states[:t], _fp8_values(x))
        graphed.combine(sent.hidden_states, sent)
    assert graphed.buffers(torch.device("cpu"), 8).graphs["dispatch"].replays == 3


class _NoRows:
    fp8_rows = False


@pytest.mark.parametrize("name", ["unquantized", "fp8-channel", "fp8-tensor-dyn", "int8", "w4a16"])
def test_fp8_dispatch_is_refused_for_layers_whose_activations_are_not_fp8_groups_of_128(monkeypatch, name):
    import moe_core.dispatch.base as dispatch_base
    from moe_core.dispatch.fp8_rows import check_fp8_dispatch
    from moe_core.errors import InvalidConfigError

    monkeypatch.setattr(dispatch_base.dist, "is_initialized", lambda: True)
    sch, ok = scheme(name), scheme("fp8-block")
    rows = PackedAllToAllDispatcher
    with pytest.raises(InvalidConfigError, match=f"this layer is {name}: leave fp8_dispatch off"):
        check_fp8_dispatch(ExpertParallelGroup(fp8_dispatch=True), rows, sch.weight_key, sch.activation_key)
    with pytest.raises(InvalidConfigError, match="needs a token-row dispatcher .*, got _NoRows: set ParallelConfig"):
        check_fp8_dispatch(ExpertParallelGroup(fp8_dispatch=True), _NoRows(), ok.weight_key, ok.activation_key)
    check_fp8_dispatch(ExpertParallelGroup(fp8_dispatch=True), rows, ok.weight_key, ok.activation_key)
    check_fp8_dispatch(ExpertParallelGroup(), _NoRows(), sch.weight_key, sch.activation_key)  # off: nothing to check
    with pytest.raises(InvalidConfigError, match="fp8_dispatch must be True or False"):
        ExpertParallelGroup(fp8_dispatch=1)


def test_only_the_token_row_dispatchers_send_fp8_rows():
    assert {s.name for s in SPECS if s.load().fp8_rows} == {"packed_all_to_all", "peer_copy"}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_a_buffer_set_holds_the_layers_dtype_and_fp8_staging_only_for_fp8_rows(dtype):
    fp8, plain = _fp8_pair(3, 256, dtype)
    for d, fp8_rows in ((fp8, True), (plain, False)):
        bufs = d.buffers(torch.device("cpu"), 3)
        assert (bufs.out.dtype, bufs.back.dtype, bufs.recv_weights.dtype, bufs.recv_ids.dtype) == (dtype, dtype, torch.float32, torch.int32)
        assert bufs.out.shape == bufs.back.shape == (6, 256)
        if fp8_rows:
            assert (bufs.stage_hidden.dtype, bufs.stage_hidden.shape, bufs.hidden.dtype, bufs.hidden.shape) == (dtype, (3, 256), dtype, (6, 256))
        else:  # 16-bit rows: the experts read the received rows in place, and nothing is staged
            assert bufs.stage_hidden is None and bufs.hidden is None
