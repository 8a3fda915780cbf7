"""Token rows: every token travels to every rank in a fixed row, its routing in the same row.

The data path shared by the dispatchers that move fixed buffers of token rows (``packed_all_to_all``
over a collective, ``peer_copy`` by copies into the peers' symmetric memory). Per forward, with
``R`` rows per destination (``max_tokens_per_rank``) and ``N`` ranks:

* **dispatch**: token ``t``'s row in destination block ``d`` of the send buffer ``[N * R, width]`` is row
  ``d * R + t``. Each row holds the token's hidden state and its routing (global ids, float32 weights) in
  ``width`` bytes, a multiple of 128. The hidden states are written into every block with one broadcast copy
  from the caller's tensor; a row carries the token's routing where rank ``d`` holds one of its experts, and
  the ids of an expert of another rank elsewhere (rows past the forward's tokens too), which the receiver's
  expert map skips: no expert work. The transport delivers block ``d`` to rank ``d``; the receiver's experts
  read the hidden states and routing as views of the received rows. The fixed buffers travel whole whatever
  the routing, so a row per (token, rank) costs no bytes that packing the rows would save, and needs no slot
  computation.
* **combine**: the experts' output ``[N * R, H]`` (each row already the weighted sum over this rank's experts;
  zero for a row with no pair on this rank, as every expert-map kernel promises) goes back the same way; row
  ``t`` of every returned block belongs to token ``t``, so the result is one sum over the blocks, accumulated
  in float32.

With ``ExpertParallelGroup.fp8_dispatch`` the rows carry the hidden states as fp8 codes and their scales
(:mod:`moe_core.dispatch.fp8_rows`): the caller's tokens are staged, the dispatch step quantizes the staged rows
into every block and dequantizes the received rows into a buffer of the layer's dtype, which the experts read.

Buffers are allocated once per (layer, device, ``R``) and reused, so addresses never change (CUDA graphs
capture it).

Eager forwards on a GPU launch few kernels and make no collective call through ``torch.distributed``: the
caller's routing is copied into staging rows and its hidden states into the send buffer, and the rest of the
dispatch (the routing guard, each token's destination ranks, the routing or blank ids of every row, the transport,
the received routing) is replayed from a CUDA graph of its own; the combine copies the experts' output into a
fixed buffer, replays its transport and sums. Both graphs belong to a buffer set (rows per destination, the same
on every rank), so every rank captures them at the same forward, the second one of that set (a synchronisation,
once), and replays them from then on. While the caller captures a graph, and on CPUs, the same work runs as plain
torch ops.
"""

from __future__ import annotations

import abc
import logging
from dataclasses import dataclass, field

import torch

from moe_core.config import ActivationFormat
from moe_core.dispatch import fp8_rows
from moe_core.dispatch.base import Dispatched, Dispatcher
from moe_core.routing import Routing

logger = logging.getLogger("moe_core")
_INT32 = torch.iinfo(torch.int32)

#: Row widths are multiples of this many bytes (a cache line): every row starts aligned, and the hidden states'
#: row stride, in elements of any dtype up to 8 bytes, is a multiple of 16, which Triton's kernels specialize on
#: (a stride it cannot prove divisible by 16 costs vectorized loads of the experts' GEMM over the received rows).
ROW_ALIGN = 128
#: Buffer sets kept per dispatcher (one per row count; the oldest is dropped first, but never one a CUDA graph
#: was captured with). With a fixed ``max_tokens_per_rank`` there is only one; without it, row counts are powers of two.
MAX_BUFFER_SETS = 4


def word_dtype(nbytes: int) -> torch.dtype:
    """The widest integer dtype whose size divides ``nbytes``: rows of that many bytes move as words of it."""
    return next(dt for dt in (torch.int64, torch.int32, torch.int16, torch.uint8) if nbytes % dt.itemsize == 0)


@dataclass(frozen=True)
class RowLayout:
    """Byte layout of one token row: hidden states (``hidden_bytes``), then ``groups`` float32 scales of fp8 hidden
    states (none for 16-bit rows) from ``scales_at``, padding to 8 bytes, top-k int32 ids, top-k float32 weights,
    then padding to :data:`ROW_ALIGN`. The routing (ids and weights) is ``8 * top_k`` bytes from ``ids_at``."""

    hidden_bytes: int
    top_k: int
    groups: int = 0

    @property
    def scales_at(self) -> int:
        return -(-self.hidden_bytes // 4) * 4

    @property
    def ids_at(self) -> int:
        return -(-(self.scales_at + 4 * self.groups) // 8) * 8

    @property
    def routing_bytes(self) -> int:
        return 8 * self.top_k

    @property
    def weights_at(self) -> int:
        return self.ids_at + 4 * self.top_k

    @property
    def width(self) -> int:
        end = self.ids_at + self.routing_bytes
        return -(-end // ROW_ALIGN) * ROW_ALIGN

    def hidden(self, rows: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """The hidden states of byte rows ``[n, width]``: a strided ``[n, H]`` view, no copy."""
        return rows[:, : self.hidden_bytes].view(dtype)

    def scales(self, rows: torch.Tensor) -> torch.Tensor:
        """The float32 scales of fp8 hidden states ``[n, groups]`` (a view)."""
        return rows[:, self.scales_at: self.scales_at + 4 * self.groups].view(torch.float32)

    def ids(self, rows: torch.Tensor) -> torch.Tensor:
        return rows[:, self.ids_at: self.weights_at].view(torch.int32)

    def weights(self, rows: torch.Tensor) -> torch.Tensor:
        return rows[:, self.weights_at: self.weights_at + 4 * self.top_k].view(torch.float32)

    def routing_words(self, rows: torch.Tensor) -> torch.Tensor:
        """The ids and weights of byte rows ``[n, width]`` as int64 words ``[n, top_k]`` (a view)."""
        return rows[:, self.ids_at: self.ids_at + self.routing_bytes].view(torch.int64)

    def hidden_words(self, rows: torch.Tensor) -> torch.Tensor:
        """The hidden states of byte rows as words of :func:`word_dtype` (a view)."""
        return rows[:, : self.hidden_bytes].view(word_dtype(self.hidden_bytes))


@dataclass(frozen=True, eq=False)
class RowBuffers:
    """The buffers of one (device, rows per destination ``R``): reused by every forward.

    ``send`` [N*R, width]; ``stage`` [R, 8 * top_k] bytes, this rank's routing (ids, then weights); ``live``
    bool [R], which staged rows hold this forward's tokens; ``blank_ids`` [N*R, k], the ids a row carries where its
    destination holds none of the token's experts; ``recv`` [N*R, width] and the received routing ``recv_ids``,
    ``recv_weights`` [N*R, k]; ``out`` [N*R, H], the experts' output to send back; ``back`` [N*R, H]. fp8 rows only:
    ``stage_hidden`` [R, H], the caller's tokens to quantize, and ``hidden`` [N*R, H], the received ones
    dequantized."""

    rows: int
    send: torch.Tensor
    stage: torch.Tensor
    live: torch.Tensor
    blank_ids: torch.Tensor
    recv: torch.Tensor
    recv_ids: torch.Tensor
    recv_weights: torch.Tensor
    out: torch.Tensor
    back: torch.Tensor
    stage_hidden: torch.Tensor | None = None
    hidden: torch.Tensor | None = None
    graphs: dict = field(default_factory=dict)  # step name -> its CUDA graph (None: seen once, captured next time)


class TokenRowsDispatcher(Dispatcher):
    """Base of the token-row dispatchers (STANDARD format); subclasses provide the transport."""

    micro_batch_safe = True  # every buffer belongs to the instance
    fp8_rows = True

    output_format = ActivationFormat.STANDARD

    def __init__(self, config, group):
        super().__init__(config, group)
        hidden = config.hidden_size
        #: Whether rows carry fp8 codes and scales (ExpertParallelGroup.fp8_dispatch) rather than the layer's dtype.
        self.fp8 = group.fp8_dispatch
        self.layout = (RowLayout(hidden, config.top_k, fp8_rows.groups(hidden)) if self.fp8
                       else RowLayout(hidden * config.dtype.itemsize, config.top_k))
        #: The staging rows hold the routing alone: a row layout without hidden states.
        self.stage_layout = RowLayout(0, config.top_k)
        self._buffers: dict[tuple[torch.device, int], RowBuffers] = {}
        #: Keys of the buffer sets a CUDA graph was captured with: never dropped.
        self._pinned: set[tuple[torch.device, int]] = set()
        #: Replay the steps of eager GPU forwards from CUDA graphs (False after a capture failed: plain ops).
        self.graph_steps = True

    # ------------------------------------------------------------------ transport (subclasses)
    @abc.abstractmethod
    def allocate_received(self, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """A zeroed buffer this rank receives into (the transport may need special memory); called once per buffer."""

    @abc.abstractmethod
    def send_rows(self, send: torch.Tensor, recv: torch.Tensor) -> None:
        """Deliver ``send``'s block ``d`` of ``R`` rows to block ``rank`` of rank ``d``'s ``recv`` (all ranks call it)."""

    # ------------------------------------------------------------------ the data path
    def buffers(self, device: torch.device, rows: int) -> RowBuffers:
        """The buffers for ``rows`` tokens per rank on ``device``, made on first use.

        A set used under a CUDA-graph capture is kept for good: the captured graph holds its addresses. Beyond
        :data:`MAX_BUFFER_SETS` the oldest other set is dropped, never during a capture (freeing the pack step's
        own graphs there is an error that invalidates the capture). Every rank drops the same set at the same
        forward."""
        key = (device, rows)
        capturing = self._under_capture(device)
        found = self._buffers.get(key)
        if found is None:
            droppable = [k for k in self._buffers if k not in self._pinned]
            if len(self._buffers) >= MAX_BUFFER_SETS and droppable and not capturing:
                del self._buffers[droppable[0]]
            found = self._buffers[key] = self._make_buffers(device, rows)
        if capturing:
            self._pinned.add(key)
        return found

    def rows_per_rank(self, num_tokens: int, device: torch.device) -> int:
        """Rows per destination for this forward: ``max_tokens_per_rank``, else the group's largest token count
        rounded up to a power of two (so that few buffer sets serve every count)."""
        rows = self.tokens_per_rank(num_tokens, device)
        return rows if self.group.max_tokens_per_rank is not None else 1 << (rows - 1).bit_length()

    def _make_buffers(self, device: torch.device, rows: int) -> RowBuffers:
        ep, n_local, k, hidden = self.config.parallel.ep_size, self.local_experts, self.config.top_k, self.config.hidden_size
        width, dtype = self.layout.width, self.config.dtype
        # A blank row of destination d routes to the first expert of rank d + 1: never one of d's.
        elsewhere = ((torch.arange(ep, device=device, dtype=torch.int32) + 1) % ep) * n_local
        blank = elsewhere.repeat_interleave(rows).view(-1, 1).expand(ep * rows, k).contiguous()
        return RowBuffers(
            rows,
            send=torch.zeros(ep * rows, width, dtype=torch.uint8, device=device),
            stage=torch.zeros(rows, self.layout.routing_bytes, dtype=torch.uint8, device=device),
            live=torch.zeros(rows, dtype=torch.bool, device=device),
            blank_ids=blank,
            recv=self.allocate_received((ep * rows, width), torch.uint8, device),
            recv_ids=torch.zeros(ep * rows, k, dtype=torch.int32, device=device),
            recv_weights=torch.zeros(ep * rows, k, dtype=torch.float32, device=device),
            out=torch.zeros(ep * rows, hidden, dtype=dtype, device=device),
            back=self.allocate_received((ep * rows, hidden), dtype, device),
            stage_hidden=torch.zeros(rows, hidden, dtype=dtype, device=device) if self.fp8 else None,
            hidden=torch.zeros(ep * rows, hidden, dtype=dtype, device=device) if self.fp8 else None,
        )

    def dispatch(self, hidden_states: torch.Tensor, routing: Routing) -> Dispatched:
        t = hidden_states.shape[0]
        device = hidden_states.device
        bufs = self.buffers(device, self.rows_per_rank(t, device))
        self.stage_routing(bufs, routing)
        self.write_hidden(bufs, hidden_states)
        self._run_step(bufs, "dispatch", lambda: self.dispatch_step(bufs))
        got = Routing(bufs.recv_ids, bufs.recv_weights)
        received = bufs.hidden if self.fp8 else self.layout.hidden(bufs.recv, hidden_states.dtype)
        return Dispatched(received, got, self.expert_map(device), (t, bufs))

    def stage_routing(self, bufs: RowBuffers, routing: Routing) -> None:
        """This rank's routing into the staging rows (ids as int32: wider ids are clamped first, so that no invalid
        id becomes a valid one), and which rows hold it."""
        t, ids = routing.num_tokens, routing.topk_ids
        stage = bufs.stage[:t]
        self.stage_layout.ids(stage).copy_(ids if ids.dtype == torch.int32 else ids.clamp(_INT32.min, _INT32.max))
        self.stage_layout.weights(stage).copy_(routing.topk_weights)
        bufs.live.fill_(False)
        bufs.live[:t] = True

    def dispatch_step(self, bufs: RowBuffers) -> None:
        """Everything of a dispatch after staging: the fp8 codes of the staged tokens (fp8 rows), :meth:`pack`, the
        transport, the received routing (and hidden states, fp8 rows)."""
        if self.fp8:
            self.write_fp8_hidden(bufs)
        self.pack(bufs)
        self.send_rows(bufs.send, bufs.recv)
        bufs.recv_ids.copy_(self.layout.ids(bufs.recv))
        bufs.recv_weights.copy_(self.layout.weights(bufs.recv))
        if self.fp8:
            fp8_rows.dequantize_rows(self.layout.hidden(bufs.recv, torch.float8_e4m3fn), self.layout.scales(bufs.recv), bufs.hidden)

    def pack(self, bufs: RowBuffers) -> None:
        """From the staged routing to the send buffer's routing: invalid ids dropped (expert 0, weight 0; counted),
        then every row blank but those of this forward's tokens whose destination holds one of their experts, which
        carry the token's routing. Rows past the forward's tokens hold earlier forwards' routing, already cleaned."""
        ids, weights = self.stage_layout.ids(bufs.stage), self.stage_layout.weights(bufs.stage)
        bad = self.record_invalid(ids) & bufs.live.unsqueeze(1)
        ids.masked_fill_(bad, 0)
        weights.masked_fill_(bad, 0.0)
        send_ids = self.layout.ids(bufs.send)
        send_ids.copy_(bufs.blank_ids)
        blocks = self.blocks(send_ids)
        wanted = (self.destinations(ids) & bufs.live).unsqueeze(-1)  # [N, R, 1]
        blocks.copy_(torch.where(wanted, ids, blocks))
        self.blocks(self.layout.weights(bufs.send)).copy_(torch.where(wanted, weights, 0.0))

    def destinations(self, topk_ids: torch.Tensor) -> torch.Tensor:
        """bool [N, T]: whether rank ``d`` holds one of token ``t``'s experts (ids already valid)."""
        owner = torch.div(topk_ids, self.local_experts, rounding_mode="floor").long()
        wanted = torch.zeros(topk_ids.shape[0], self.config.parallel.ep_size, dtype=torch.bool, device=topk_ids.device)
        return wanted.scatter_(1, owner, True).t()

    def blocks(self, rows: torch.Tensor) -> torch.Tensor:
        """``[N * R, ...]`` rows as ``[N, R, ...]``: one block per destination rank (a view)."""
        return rows.view(self.config.parallel.ep_size, -1, *rows.shape[1:])

    def write_hidden(self, bufs: RowBuffers, hidden_states: torch.Tensor) -> None:
        """The hidden states into their rows of every block, read straight from the caller's tensor (one copy of
        words); for fp8 rows into the staging rows, which the dispatch step quantizes."""
        if self.fp8:
            bufs.stage_hidden[: hidden_states.shape[0]].copy_(hidden_states)
            return
        self.into_every_block(self.layout.hidden_words(bufs.send), self.as_words(hidden_states))

    def write_fp8_hidden(self, bufs: RowBuffers) -> None:
        """The fp8 codes and scales of every staged row into its row of every block (rows past the forward's tokens
        carry earlier tokens' codes, which no expert reads)."""
        q = fp8_rows.quantize_rows(bufs.stage_hidden)
        self.into_every_block(self.layout.hidden_words(bufs.send), self.as_words(q.data))
        self.into_every_block(self.layout.scales(bufs.send), q.scale)

    def as_words(self, hidden: torch.Tensor) -> torch.Tensor:
        """Hidden states (the layer's dtype, or fp8 codes) ``[n, H]`` as the words of the rows' hidden part."""
        return hidden.contiguous().view(torch.uint8).view(word_dtype(self.layout.hidden_bytes))

    def into_every_block(self, rows: torch.Tensor, source: torch.Tensor) -> None:
        """``source`` [n, ...] into the first ``n`` of ``rows`` [N * R, ...] in every destination's block (one
        broadcast copy)."""
        target = self.blocks(rows)[:, : source.shape[0]]
        target.copy_(source.unsqueeze(0).expand_as(target))

    def combine(self, expert_output: torch.Tensor, dispatched: Dispatched) -> torch.Tensor:
        t, bufs = dispatched.state
        if self._graphable(bufs.send.device):
            bufs.out.copy_(expert_output)  # the combine graph sends from this fixed buffer
            self._run_step(bufs, "combine", lambda: self.send_rows(bufs.out, bufs.back))
        else:
            self.send_rows(expert_output.contiguous(), bufs.back)
        # Row t of every returned block is token t's result on that rank (zero where it had no expert there).
        return self.blocks(bufs.back)[:, :t].sum(0)

    # ------------------------------------------------------------------ eager steps from CUDA graphs
    def _run_step(self, bufs: RowBuffers, name: str, step) -> None:
        """``step()``, replayed from a CUDA graph in eager GPU forwards from the second forward of ``bufs``."""
        graph = None
        if self._graphable(bufs.send.device):  # never under an outer capture: a replay there is an error
            if name in bufs.graphs:
                graph = bufs.graphs[name] or self._capture(bufs, name, step)
            else:
                bufs.graphs[name] = None  # seen once, run as ops (warm-up); the next forward captures
        if graph is None:
            step()
        else:
            graph.replay()

    def _graphable(self, device: torch.device) -> bool:
        """Whether steps may come from graphs of their own: eager forwards on a GPU, unless a capture failed."""
        return device.type == "cuda" and self.graph_steps and not self._under_capture(device)

    @staticmethod
    def _under_capture(device: torch.device) -> bool:
        """Whether this forward is being captured into a CUDA graph."""
        return device.type == "cuda" and torch.cuda.is_current_stream_capturing()

    def _capture(self, bufs: RowBuffers, name: str, step):
        """A CUDA graph of ``step`` (kept in ``bufs``), or None after logging why not (plain ops from then on)."""
        device = bufs.send.device
        stream = torch.cuda.Stream(device)
        stream.wait_stream(torch.cuda.current_stream(device))
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph, stream=stream, capture_error_mode="thread_local"):
                step()
        except Exception as exc:  # noqa: BLE001 - any capture failure: plain ops from now on
            logger.warning("%s: capturing its %s step failed, eager forwards run it as plain ops: %s", type(self).__name__, name, exc)
            self.graph_steps = False
            bufs.graphs.clear()
            return None
        torch.cuda.current_stream(device).wait_stream(stream)
        bufs.graphs[name] = graph
        return graph
