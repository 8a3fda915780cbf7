"""Robustness conformance: bad routing and bad values never crash a backend or poison the device.

:func:`check_robustness` (also reachable as ``conformance.check_robustness``) hands a backend, for each
scheme it supports here, routing that no kernel may trust — ids out of range, negative, beyond int32,
the sentinel ``-1`` with and without an expert map, expert-map entries out of range, batched counts
above capacity or negative — and values it must survive: zero tokens, a NaN token, an infinite
router weight. For every case the backend must either raise a
:class:`~moe_core.errors.KernelInputError` at once, or return the documented masked result (invalid
pairs contribute nothing; other tokens are unaffected by one token's NaN or infinite weight) *and*
report the invalid values through ``kernel.routing_errors.check()``. After every case a valid call
must still match the reference: a poisoned CUDA context fails that.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

import torch

from moe_core.batched import dispatch
from moe_core.config import ActivationFormat, MoEConfig, ParallelConfig
from moe_core.errors import KernelInputError
from moe_core.kernel import MoEKernel
from moe_core.numerics import relative_error, tolerance
from moe_core.presets import random_inputs, random_layer
from moe_core.quant import scheme_for_keys
from moe_core.reference.kernel import ReferenceKernel
from moe_core.registry import Registry
from moe_core.routing import BatchedRouting, Routing
from moe_core.routing_guard import InvalidRoutingError, RoutingErrorCounter, drop_invalid_routing
from moe_core.spec import SupportQuery


@dataclass(frozen=True)
class Inputs:
    """One call's inputs; ``invalid`` counts the routing values the kernel must report."""

    x: torch.Tensor
    routing: Routing | BatchedRouting
    expert_map: torch.Tensor | None = None
    invalid: int = 0
    #: Output rows allowed to hold anything (the poisoned token itself); all others must match.
    free_rows: tuple[int, ...] = ()


def _with_id(value: int) -> Callable[[MoEConfig, Inputs], Inputs]:
    def spoil(cfg: MoEConfig, inp: Inputs) -> Inputs:
        ids = inp.routing.topk_ids.long() if not -(2**31) <= value < 2**31 else inp.routing.topk_ids.clone()
        ids[0, 0] = value
        return dataclasses.replace(inp, routing=Routing(ids, inp.routing.topk_weights), invalid=1)
    return spoil


def _map_entry(value: int) -> Callable[[MoEConfig, Inputs], Inputs]:
    def spoil(cfg: MoEConfig, inp: Inputs) -> Inputs:
        hit = int(inp.routing.topk_ids[0, 0])
        bad_map = inp.expert_map.clone()
        bad_map[hit] = value
        return dataclasses.replace(inp, expert_map=bad_map, invalid=int((inp.routing.topk_ids == hit).sum()))
    return spoil


def _nan_token(cfg: MoEConfig, inp: Inputs) -> Inputs:
    x = inp.x.clone()
    x[0] = float("nan")
    return dataclasses.replace(inp, x=x, free_rows=(0,))


def _inf_weight(cfg: MoEConfig, inp: Inputs) -> Inputs:
    weights = inp.routing.topk_weights.clone()
    weights[0, 0] = float("inf")
    return dataclasses.replace(inp, routing=Routing(inp.routing.topk_ids, weights), free_rows=(0,))


def _no_tokens(cfg: MoEConfig, inp: Inputs) -> Inputs:
    r = inp.routing
    return dataclasses.replace(inp, x=inp.x[:0], routing=Routing(r.topk_ids[:0], r.topk_weights[:0]))


def _counts(change: Callable[[torch.Tensor, int], torch.Tensor], invalid: Callable[[torch.Tensor, int], int]):
    def spoil(cfg: MoEConfig, inp: Inputs) -> Inputs:
        counts, cap = inp.routing.expert_num_tokens, inp.x.shape[1]
        new = change(counts.clone(), cap)
        return dataclasses.replace(inp, routing=BatchedRouting(new), invalid=invalid(new, cap))
    return spoil


def _bad_counts(counts: torch.Tensor, cap: int) -> int:
    return int(((counts < 0) | (counts > cap)).sum())


#: name -> (needs an expert map, spoil). Cases without a map run on a config without EP.
STANDARD_CASES: dict[str, tuple[bool, Callable[[MoEConfig, Inputs], Inputs]]] = {
    "id = num_experts": (False, lambda cfg, inp: _with_id(cfg.num_experts)(cfg, inp)),
    "id = 100000": (False, _with_id(100000)),
    "id = -5": (False, _with_id(-5)),
    "id = 2**40 (int64)": (False, _with_id(2**40)),
    "sentinel -1, no map": (False, _with_id(-1)),
    "sentinel -1, with map": (True, _with_id(-1)),
    "id = num_experts, with map": (True, lambda cfg, inp: _with_id(cfg.num_experts)(cfg, inp)),
    "map entry = local experts": (True, lambda cfg, inp: _map_entry(cfg.local_num_experts)(cfg, inp)),
    "map entry = -7": (True, _map_entry(-7)),
    "remote experts only (map -1)": (True, lambda cfg, inp: dataclasses.replace(inp, expert_map=torch.full_like(inp.expert_map, -1))),
    "zero tokens": (False, _no_tokens),
    "NaN token": (False, _nan_token),
    "inf router weight": (False, _inf_weight),
}
BATCHED_CASES: dict[str, Callable[[MoEConfig, Inputs], Inputs]] = {
    "count above capacity": _counts(lambda c, cap: c.index_fill_(0, torch.tensor([0], device=c.device), cap + 5), _bad_counts),
    "count = 2**31 - 1": _counts(lambda c, cap: c.to(torch.int32).index_fill_(0, torch.tensor([1], device=c.device), 2**31 - 1), _bad_counts),
    "negative count": _counts(lambda c, cap: c.index_fill_(0, torch.tensor([0], device=c.device), -3), _bad_counts),
    "all counts zero": _counts(lambda c, cap: torch.zeros_like(c), _bad_counts),
}


def reported_count(counter: RoutingErrorCounter) -> int:
    """How many invalid values ``counter`` reports at :meth:`~moe_core.routing_guard.RoutingErrorCounter.check`
    (which waits for the device and resets it); 0 when it reports none. For tests comparing two counters."""
    try:
        counter.check()
    except InvalidRoutingError as exc:
        return exc.count
    return 0


def check_robustness(
    reg: Registry,
    backend: str,
    *,
    device: str | None = None,
    config: MoEConfig | None = None,
    schemes: tuple[str, ...] | None = None,
    tokens: int = 9,
    garbage_calls: int = 0,
    seed: int = 0,
) -> list[dict]:
    """Run every robustness case against ``backend`` for each scheme it supports here (or ``schemes``).

    Returns one record per (scheme, case): ``outcome`` "raised" (a typed error at the call) or
    "masked" (masked result matched, invalid values reported), and the error of the valid call
    made right after. ``garbage_calls`` > 0 then sends that many random garbage routings through
    one kernel and checks a valid call once more. Raises AssertionError naming backend, scheme and case.
    """
    from moe_core.resolver import current_platform

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    platform = current_platform()
    spec = reg.specs[backend]
    base = config or MoEConfig(num_experts=8, top_k=2, hidden_size=256, intermediate_size=128, dtype=torch.float16)
    batched = ActivationFormat.BATCHED_EXPERTS in spec.formats and ActivationFormat.STANDARD not in spec.formats
    records = []
    for wkey, akey in sorted(spec.schemes, key=str):
        sch = scheme_for_keys(wkey, akey)
        if sch is None or (schemes is not None and sch.name not in schemes):
            continue
        for with_map in (False, True):
            ep = 2 if with_map else 1
            cfg = dataclasses.replace(base, parallel=ParallelConfig(ep_size=ep, use_batched_activation_format=batched))
            if batched and with_map or not reg.supports(spec, SupportQuery(cfg, wkey, akey, platform)).ok:
                continue
            pair = _Pair(spec.load_kernel()(cfg, wkey, akey), ReferenceKernel(cfg, wkey, akey), random_layer(cfg, sch, device=device, seed=seed))
            label = f"{backend} {sch.name}"
            valid = _valid_inputs(cfg, tokens, device, seed, batched)
            cases = BATCHED_CASES.items() if batched else ((n, f) for n, (m, f) in STANDARD_CASES.items() if m == with_map)
            for name, spoil in cases:
                outcome = pair.run_case(spoil(cfg, valid), f"{label} [{name}]")
                records.append({"scheme": sch.name, "case": name, "outcome": outcome, "after": pair.check_valid(valid, f"{label} after [{name}]")})
            if garbage_calls:
                pair.garbage(valid, garbage_calls, seed)
                records.append({"scheme": sch.name, "case": f"{garbage_calls} garbage routings", "outcome": "survived",
                                "after": pair.check_valid(valid, f"{label} after {garbage_calls} garbage routings")})
    return records


def _valid_inputs(cfg: MoEConfig, tokens: int, device: str, seed: int, batched: bool) -> Inputs:
    x, routing = random_inputs(cfg, tokens, device=device, seed=seed + 1)
    if batched:
        xb, brouting, _ = dispatch(x, routing, cfg.local_num_experts, max_tokens=tokens)
        return Inputs(xb, brouting)
    if not cfg.parallel.use_ep:
        return Inputs(x, routing)
    local = cfg.local_num_experts  # this rank owns the first E / ep experts
    expert_map = torch.where(torch.arange(cfg.num_experts) < local, torch.arange(cfg.num_experts), -1).to(device)
    return Inputs(x, routing, expert_map)


@dataclass
class _Pair:
    """The kernel under test and the reference oracle, each with its prepared weights."""

    kernel: MoEKernel
    oracle: ReferenceKernel
    raw: object

    def __post_init__(self) -> None:
        self.weights = self.kernel.prepare_weights(self.raw)
        self.ref_weights = self.oracle.prepare_weights(self.raw)

    def call(self, kernel, weights, inp: Inputs) -> torch.Tensor:
        return kernel.apply(inp.x, weights, inp.routing, expert_map=inp.expert_map)

    def masked_reference(self, inp: Inputs) -> torch.Tensor:
        routing, expert_map = drop_invalid_routing(self.oracle.config, inp.x, inp.routing, inp.expert_map, RoutingErrorCounter("", ""))
        return self.call(self.oracle, self.ref_weights, dataclasses.replace(inp, routing=routing, expert_map=expert_map))

    def run_case(self, inp: Inputs, label: str) -> str:
        try:
            got = self.call(self.kernel, self.weights, inp)
        except KernelInputError:
            self._expect_no_report(label)
            return "raised"
        want = self.masked_reference(inp)
        assert got.shape == want.shape, f"{label}: output shape {tuple(got.shape)}, expected {tuple(want.shape)}"
        keep = [r for r in range(got.shape[0]) if r not in inp.free_rows]
        if keep and self._finite_scales():
            err = relative_error(got[keep], want[keep])
            tol = tolerance(self.kernel.activation_key, self.kernel.config.dtype)
            assert err <= tol, f"{label}: unaffected rows differ from the masked reference (relative error {err:.3g} > {tol:.3g})"
        self._expect_report(inp.invalid, label)
        return "masked"

    def _finite_scales(self) -> bool:
        """False where one token's NaN reaches every token by design: a per-tensor dynamic activation scale."""
        key = self.kernel.activation_key
        return key is None or key.static or not key.group.is_per_tensor

    def _expect_report(self, invalid: int, label: str) -> None:
        count = reported_count(self.kernel.routing_errors)
        assert count == invalid, (f"{label}: reported {count} invalid values, expected {invalid}" if count else
                                  f"{label}: {invalid} invalid values were dropped but kernel.routing_errors.check() reported none")

    def _expect_no_report(self, label: str) -> None:
        count = reported_count(self.kernel.routing_errors)
        assert not count, f"{label}: raised at the call and also counted {count} values on the device"

    def check_valid(self, inp: Inputs, label: str) -> float:
        got, want = self.call(self.kernel, self.weights, inp), self.call(self.oracle, self.ref_weights, inp)
        err = relative_error(got, want)
        tol = tolerance(self.kernel.activation_key, self.kernel.config.dtype)
        assert err <= tol, f"{label}: a valid call no longer matches the reference (relative error {err:.3g} > {tol:.3g})"
        self._expect_report(0, label)
        return err

    def garbage(self, inp: Inputs, calls: int, seed: int) -> None:
        """Random garbage routing (any int32 ids, or any counts) through one kernel, then one sync."""
        gen = torch.Generator(device="cpu").manual_seed(seed)
        for _ in range(calls):
            if isinstance(inp.routing, BatchedRouting):
                counts = torch.randint(-(2**31), 2**31 - 1, inp.routing.expert_num_tokens.shape, generator=gen, dtype=torch.int32)
                routing = BatchedRouting(counts.to(inp.x.device))
            else:
                ids = torch.randint(-(2**31), 2**31 - 1, inp.routing.topk_ids.shape, generator=gen, dtype=torch.int32)
                ids = torch.where(torch.rand(ids.shape, generator=gen) < 0.5, ids % self.kernel.config.num_experts, ids)
                routing = Routing(ids.to(inp.x.device), inp.routing.topk_weights)
            try:
                self.call(self.kernel, self.weights, dataclasses.replace(inp, routing=routing))
            except KernelInputError:
                pass
        try:
            self.kernel.routing_errors.check()
        except InvalidRoutingError:
            pass
