"""Invalid routing on the GPU: dropped by the kernels, counted on the device, reported without a sync.

A routing value a kernel cannot use — an expert id outside ``[0, num_experts)``, an expert-map entry
outside ``[-1, local_num_experts)``, a batched count outside ``[0, max_tokens]`` — must never make a
kernel touch memory outside its tensors: an illegal address poisons the CUDA context and every later
call in the process fails. Kernels therefore *drop* such a pair (it contributes nothing to the
output; a bad batched count is clamped into range) and *count* it in a
:class:`RoutingErrorCounter`, three int64 values on the device: how many bad values were met, the
smallest and the largest.

Nothing here synchronises with the host on the hot path. :meth:`RoutingErrorCounter.snapshot` copies
the counter asynchronously into pinned memory after a call; :meth:`RoutingErrorCounter.poll` looks at
the last copy only if the GPU has finished it, and raises :class:`InvalidRoutingError` for bad values
it has not reported before. :meth:`RoutingErrorCounter.check` synchronises and raises
deterministically. :class:`~moe_core.layer.MoELayer` calls these for you (docs/robustness.md).
"""

from __future__ import annotations

import time
import torch

from moe_core.config import ActivationFormat, MoEConfig
from moe_core.errors import KernelInputError
from moe_core.routing import BatchedRouting, Routing

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


class InvalidRoutingError(KernelInputError):
    """A kernel met routing values outside their valid range; the affected pairs were dropped."""

    def __init__(self, argument: str, count: int, smallest: int, largest: int, valid: str):
        self.count, self.smallest, self.largest = count, smallest, largest
        super().__init__(
            argument,
            f"{count} value(s) outside {valid} were met by the GPU kernels (seen range [{smallest}, {largest}]); "
            "those pairs contributed nothing to the outputs of the calls that received them. Fix the router, "
            "or set MOE_CORE_FULL_CHECKS=1 to raise synchronously at the offending call",
        )


class HostCopy:
    """One counter's asynchronous copies to the host: pinned memory and the CUDA event that marks the last one done."""

    def __init__(self, device: torch.device):
        self.host = torch.empty(3, dtype=torch.int64, pin_memory=True)
        self.done = torch.cuda.Event()

    def start(self, buf: torch.Tensor) -> None:
        """Copy ``buf`` to the host on the current stream; never waits."""
        self.host.copy_(buf, non_blocking=True)
        self.done.record()

    def finished(self) -> bool:
        """Whether the last copy has landed (true before the first one)."""
        return self.done.query()

    def values(self) -> list[int]:
        """``[count, smallest, largest]`` as of the last finished copy."""
        return self.host.tolist()


class RoutingErrorCounter:
    """Device-side count of invalid routing values, one int64 triple ``[count, smallest, largest]`` per device.

    ``argument`` and ``valid`` name what is counted in the error message (``"routing.topk_ids"``,
    ``"[0, 128)"``). Kernels write into :meth:`buffer` (Triton atomics) or call :meth:`record`
    (torch ops); neither synchronises.
    """

    #: Seconds between two asynchronous copies to the host (see :meth:`snapshot`).
    min_interval_s = 1e-3
    #: Raised for counted values: called as ``error(argument, count, smallest, largest, valid)``.
    error: type[Exception] = InvalidRoutingError
    #: How a device counter reaches the host without a sync (see :meth:`snapshot`).
    host_copy: type[HostCopy] = HostCopy
    #: Device types whose counters are read where they are: reading them waits for no GPU.
    read_in_place: frozenset[str] = frozenset({"cpu"})

    def __init__(self, argument: str, valid: str):
        self.argument = argument
        self.valid = valid
        self._last_copy = -float("inf")
        self._buffers: dict[torch.device, torch.Tensor] = {}
        self._copies: dict[torch.device, HostCopy] = {}
        self._reported: dict[torch.device, int] = {}

    # ------------------------------------------------------------------ device side
    def buffer(self, device: torch.device) -> torch.Tensor:
        """The int64 ``[count, smallest, largest]`` tensor on ``device`` (made on first use)."""
        device = torch.device(device)
        if device.type == "cuda" and device.index is None:  # "cuda" and "cuda:0" must name one buffer
            device = torch.device("cuda", torch.cuda.current_device())
        buf = self._buffers.get(device)
        if buf is None:
            buf = self._buffers[device] = torch.tensor([0, INT64_MAX, INT64_MIN], dtype=torch.int64, device=device)
            self._reported[device] = 0
        return buf

    def record(self, values: torch.Tensor, bad: torch.Tensor) -> None:
        """Count the entries of ``values`` where ``bad`` is true, with torch ops (no host sync)."""
        buf = self.buffer(values.device)
        if values.numel() == 0:
            return
        values = values.reshape(-1).long()
        bad = bad.reshape(-1)
        buf[0] += bad.sum()
        buf[1] = torch.minimum(buf[1], torch.where(bad, values, INT64_MAX).min())
        buf[2] = torch.maximum(buf[2], torch.where(bad, values, INT64_MIN).max())

    # ------------------------------------------------------------------ host side
    def snapshot(self) -> None:
        """Start an asynchronous copy of each CUDA counter to pinned memory; never waits.

        Skipped while a CUDA graph is being captured, while the previous copy is still in flight,
        and within :attr:`min_interval_s` of the last copy (a copy costs ~25 µs of host time on an
        H100 machine); the counter is cumulative, so a later copy sees the skipped calls' values too.
        """
        now = time.monotonic()
        if not self._buffers or now - self._last_copy < self.min_interval_s or _capturing():
            return
        self._last_copy = now
        for device, buf in self._buffers.items():
            if device.type in self.read_in_place:
                continue
            copy = self._copies.get(device)
            if copy is None:
                copy = self._copies[device] = self.host_copy(device)
            elif not copy.finished():
                continue
            copy.start(buf)

    def poll(self) -> None:
        """Raise :class:`InvalidRoutingError` for bad values that reached the host since the last report.

        Never waits for the GPU: a copy still in flight is looked at by a later poll. Counters on
        :attr:`read_in_place` devices (the CPU) are read directly.
        """
        for device, buf in self._buffers.items():
            if device.type in self.read_in_place:
                self._raise_new(device, buf.tolist())
                continue
            copy = self._copies.get(device)
            if copy is None or _capturing() or not copy.finished():
                continue  # nothing copied yet, or still in flight
            self._raise_new(device, copy.values())

    def check(self) -> None:
        """Synchronise with each device, raise for every unreported bad value, then reset the counter."""
        for device, buf in self._buffers.items():
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            values = buf.tolist()
            buf.copy_(torch.tensor([0, INT64_MAX, INT64_MIN], dtype=torch.int64))
            self._copies.pop(device, None)
            self._last_copy = -float("inf")
            reported, self._reported[device] = self._reported[device], 0
            self._raise(values[0] - reported, values)

    def _raise_new(self, device: torch.device, values: list[int]) -> None:
        new = values[0] - self._reported[device]
        if new > 0:
            self._reported[device] = values[0]
            self._raise(new, values)

    def _raise(self, new: int, values: list[int]) -> None:
        if new > 0:
            raise self.error(self.argument, new, values[1], values[2], self.valid)


def _capturing() -> bool:
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


def invalid_pairs(
    ids: torch.Tensor, num_experts: int, expert_map: torch.Tensor | None, local_num_experts: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Classify routed pairs with torch ops (no host sync): ``(local, bad, offending)``.

    ``local``: each pair's local expert, -1 where the pair is remote or invalid; ``bad``: the id lies
    outside ``[0, num_experts)`` or its expert-map entry outside ``[-1, local_num_experts)``;
    ``offending``: the value at fault (the id, or the map entry), for the error message.
    """
    ids = ids.long()
    in_range = (ids >= 0) & (ids < num_experts)
    safe = torch.where(in_range, ids, 0)
    local = expert_map.long()[safe] if expert_map is not None else safe
    bad_entry = (local < -1) | (local >= local_num_experts)
    bad = ~in_range | bad_entry
    offending = torch.where(in_range, local, ids)
    return torch.where(bad, -1, local), bad, offending


def routing_counter(config: MoEConfig) -> RoutingErrorCounter:
    """The counter a kernel for ``config`` records into, with what it counts named for the message."""
    if config.activation_format is ActivationFormat.BATCHED_EXPERTS:
        return RoutingErrorCounter("expert_num_tokens", "[0, max_tokens]")
    valid = f"[0, {config.num_experts})"
    if config.parallel.use_ep:
        valid += f" (expert_map entries: [-1, {config.local_num_experts}))"
    return RoutingErrorCounter("routing.topk_ids", valid)


def drop_invalid_routing(
    config: MoEConfig,
    hidden_states: torch.Tensor,
    routing: Routing | BatchedRouting,
    expert_map: torch.Tensor | None,
    counter: RoutingErrorCounter,
) -> tuple[Routing | BatchedRouting, torch.Tensor | None]:
    """Make routing safe for a kernel that does not guard itself, with torch ops (no host sync).

    Invalid pairs get weight 0 and go to a remote expert where the expert map has one, so that the
    kernel skips them as a guarding kernel drops them (nothing of theirs reaches the output, nor the
    scale of a per-tensor dynamic quantization of the intermediate); with no map, or every expert
    local, they go to expert 0 (they add ``0 * expert_0(x)``, zero for finite outputs). Expert-map
    entries outside [-1, local E) become -1 (remote), batched counts are clamped to [0, max_tokens];
    every invalid value is recorded in ``counter``.
    """
    if isinstance(routing, BatchedRouting):
        counts, max_tokens = routing.expert_num_tokens, hidden_states.shape[1]
        counter.record(counts, (counts < 0) | (counts > max_tokens))
        return BatchedRouting(counts.clamp(0, max_tokens)), expert_map
    _, bad, offending = invalid_pairs(routing.topk_ids, config.num_experts, expert_map, config.local_num_experts)
    counter.record(offending, bad)
    parking = 0
    if expert_map is not None:
        expert_map = torch.where((expert_map < -1) | (expert_map >= config.local_num_experts), -1, expert_map)
        parking = torch.argmax((expert_map == -1).to(torch.int8)).to(routing.topk_ids.dtype)  # first remote expert, else 0
    return Routing(torch.where(bad, parking, routing.topk_ids), torch.where(bad, 0, routing.topk_weights)), expert_map
