"""The benchmark harness: every available backend and the peers, checked against the reference, then timed.

A backend's row is timed only after its output on the same inputs matched the reference within
the scheme's tolerance; a mismatch is reported as failed, never timed as if it were right.
"""

from __future__ import annotations

import dataclasses
import itertools
import sys
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch

from moe_core.bench.peers import GROUPED_MM, GroupedMMPipeline, grouped_mm_available
from moe_core.bench.roofline import Ceilings, mean_work, measure_ceilings
from moe_core.bench.timing import Timer, gpu_idle_time, host_time
from moe_core.batched import dispatch
from moe_core.config import ActivationFormat, MoEConfig
from moe_core.platform import Platform
from moe_core.presets import random_inputs, random_layer
from moe_core.quant import QuantDtype, QuantScheme
from moe_core.reference.kernel import BACKEND_NAME as REFERENCE, ReferenceKernel
from moe_core.registry import Registry
from moe_core.spec import SupportQuery
from moe_core.numerics import relative_error, tolerance


@dataclass(frozen=True)
class BenchRequest:
    """What to measure: one layer and scheme, several token counts, some backends and peers."""

    config: MoEConfig
    scheme: QuantScheme
    tokens: tuple[int, ...]
    backends: tuple[str, ...] | None = None  # None: every registered backend that supports the layer here
    peers: tuple[str, ...] = (REFERENCE, GROUPED_MM)
    input_sets: int = 3
    reference_max_tokens: int = 4096  # the reference is timed only up to here (it loops over experts)
    cuda_graphs: bool = True  # on CUDA, time graph replays for backends that declare themselves capturable
    seed: int = 0
    label: str = ""


@dataclass
class Row:
    label: str
    backend: str
    kind: str  # "backend" or "peer"
    tokens: int
    status: str  # ok, failed, refused, skipped, error
    detail: str = ""
    time_s: float | None = None
    eager_time_s: float | None = None
    host_time_s: float | None = None  # CUDA: time until one eager call returns with the GPU idle before it
    #: CUDA graphs: replays back to back, in batches alternating with the eager calls' (Timer.back_to_back_pair); the
    #: eager time's counterpart in the same steady state. eager - graph_b2b is the host work the GPU does not hide plus
    #: whatever the clocks change in the kernels between batches (hundreds of µs for multi-ms layers: see idle_time_s)
    graph_b2b_time_s: float | None = None
    #: CUDA: seconds per call the GPU sat idle between the activities of eager calls made back to back, and of graph
    #: replays made back to back (timing.gpu_idle_time): the host work the GPU does not hide, read from the GPU's record
    idle_time_s: float | None = None
    graph_idle_time_s: float | None = None
    mode: str = ""  # "graph" (CUDA-graph replay) or "eager"
    rel_err: float | None = None
    bytes: float | None = None
    flops: float | None = None
    touched_experts: float | None = None
    tbps: float | None = None
    tflops: float | None = None
    pct_copy: float | None = None
    pct_matmul: float | None = None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass
class BenchResult:
    request: BenchRequest
    device: str
    timing: str
    ceilings: Ceilings
    rows: list[Row] = field(default_factory=list)


def _ceiling_key(scheme: QuantScheme) -> str:
    key = scheme.activation_key
    return "fp8" if key is not None and key.dtype is QuantDtype.FP8_E4M3 else "bf16"


def candidate_backends(req: BenchRequest, registry: Registry, platform: Platform) -> list[tuple[str, str]]:
    """(name, why-not or '') for every backend to measure."""
    query = SupportQuery(req.config, req.scheme.weight_key, req.scheme.activation_key, platform)
    names = req.backends if req.backends is not None else [n for n in registry.specs if n != REFERENCE]
    out = []
    for name in names:
        spec = registry.get(name)
        if spec is None:
            out.append((name, "not registered"))
            continue
        support = registry.supports(spec, query)
        out.append((name, "" if support.ok else support.explain()))
    return out


def run(
    req: BenchRequest,
    registry: Registry,
    platform: Platform,
    device: torch.device,
    *,
    timer: Timer | None = None,
    ceilings: Ceilings | None = None,
    progress: Callable[[str], None] | None = None,
) -> BenchResult:
    """Measure every (backend or peer, token count) of ``req`` on ``device``."""
    timer = timer or Timer(device.type)
    ceilings = ceilings or measure_ceilings(device, timer)
    progress = progress or (lambda msg: None)
    cfg, sch = req.config, req.scheme
    raw = random_layer(cfg, sch, device=device, seed=req.seed)
    oracle = ReferenceKernel(cfg, sch.weight_key, sch.activation_key)
    oracle_weights = oracle.prepare_weights(raw)
    runners: dict[str, tuple[str, Callable | None, str, bool]] = {}  # kind, call, why not, graph-safe
    for name, why in candidate_backends(req, registry, platform):
        if why:
            runners[name] = ("backend", None, why, False)
            continue
        kernel = registry.specs[name].load_kernel()(cfg, sch.weight_key, sch.activation_key)
        runners[name] = ("backend", _bound(kernel, kernel.prepare_weights(raw)), "", kernel.cuda_graph_safe)
    for peer in req.peers:
        if peer == REFERENCE:
            runners[REFERENCE] = ("peer", _bound(oracle, oracle_weights), "", False)
        elif peer == GROUPED_MM:
            why = grouped_mm_available(cfg, raw, device)
            runners[GROUPED_MM] = ("peer", None if why else GroupedMMPipeline(cfg, raw), why or "", True)
        else:
            raise ValueError(f"unknown peer {peer!r}; valid: {REFERENCE}, {GROUPED_MM}")
    use_graphs = req.cuda_graphs and device.type == "cuda"

    result = BenchResult(req, ceilings.device, timer.method, ceilings)
    total = len(req.tokens) * len(runners)
    step = itertools.count(1)
    for tokens in req.tokens:
        sets = [random_inputs(cfg, tokens, device=device, seed=req.seed + 1000 * tokens + i) for i in range(req.input_sets)]
        w = mean_work(cfg, sch.weight_key, [routing for _, routing in sets])  # the timed runs cycle through the sets
        if cfg.activation_format is ActivationFormat.BATCHED_EXPERTS:  # what an expert-parallel dispatch would hand over
            sets = [dispatch(x, routing, cfg.local_num_experts)[:2] for x, routing in sets]
        want = oracle.apply(sets[0][0], oracle_weights, sets[0][1])
        tol = tolerance(sch.activation_key, cfg.dtype)
        for name, (kind, fn, why, graph_safe) in runners.items():
            progress(f"[{next(step)}/{total}] {req.label or sch.name} T={tokens} {name}")
            row = Row(req.label, name, kind, tokens, "skipped", why, bytes=w.bytes, flops=w.flops, touched_experts=w.touched_experts)
            result.rows.append(row)
            if fn is None:
                row.status = "unsupported"
                continue
            if name == REFERENCE and tokens > req.reference_max_tokens:
                row.detail = f"the reference is timed up to {req.reference_max_tokens} tokens"
                continue
            try:
                got = fn(*sets[0])
            except Exception as exc:  # noqa: BLE001 - a broken backend is a row, not a crash
                row.status, row.detail = "error", f"{type(exc).__name__}: {exc}"
                continue
            if got is None:
                row.status, row.detail = "refused", "check_shapes refused this input"
                continue
            err = relative_error(got, want)
            row.rel_err = err
            if not err <= tol:
                row.status, row.detail = "failed", f"output differs from the reference: rel err {err:.3g} > {tol:.3g}"
                continue
            cycle = itertools.cycle(sets)
            call = lambda: fn(*next(cycle))  # noqa: E731
            if device.type == "cuda":
                row.host_time_s = host_time(call)
                row.idle_time_s = gpu_idle_time(call)
            graphs = None
            if use_graphs and graph_safe:
                try:
                    graphs = _capture(fn, sets)
                except RuntimeError as exc:  # claimed capturable but is not: report it, keep the eager time
                    row.detail = f"CUDA-graph capture failed ({str(exc).splitlines()[0][:120]}); eager time"
            if graphs is None:
                row.eager_time_s = row.time_s = timer.back_to_back(call)
                row.mode = "eager"
            else:
                replays = itertools.cycle(graphs)
                replay = lambda: next(replays).replay()  # noqa: E731
                row.eager_time_s, row.graph_b2b_time_s = timer.back_to_back_pair(call, replay)
                row.graph_idle_time_s = gpu_idle_time(replay)
                row.time_s = graph_time(timer, graphs)
                row.mode = "graph"
            row.status = "ok"
            row.tbps = w.bytes / row.time_s / 1e12
            row.tflops = w.flops / row.time_s / 1e12
            row.pct_copy = 100 * w.bytes / row.time_s / ceilings.copy_bytes_per_s
            rate = ceilings.matmul_flops_per_s.get(_ceiling_key(sch)) or ceilings.matmul_flops_per_s["bf16"]
            row.pct_matmul = 100 * w.flops / row.time_s / rate
    return result


def _bound(kernel, weights):
    def call(x, routing):
        if not kernel.check_shapes(x, routing).ok:
            return None
        return kernel.apply(x, weights, routing)

    return call


def graph_time(timer: Timer, graphs: Sequence) -> float:
    """The mean over the input sets of each set's graph time (``timer.time`` of its replays): what one replay takes
    on average, as the eager time (calls cycling through the sets) and the roofline (:func:`mean_work`) count it.
    A median over replays that cycle through the sets would be the time of the sets that touch fewer experts
    wherever the others touch one more (Mixtral-8x7B at 2 tokens: 3 or 4 of 8 experts)."""
    return sum(timer.time(graph.replay) for graph in graphs) / len(graphs)


def _capture(fn, sets) -> list:
    """One CUDA graph per input set (inputs are baked in), captured after a warm-up on a side stream."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for inputs in sets:
            fn(*inputs)
    torch.cuda.current_stream().wait_stream(side)
    graphs = []
    for inputs in sets:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn(*inputs)
        graphs.append(graph)
    return graphs


def stderr_progress(message: str) -> None:
    sys.stderr.write(f"\r{message:<70}")
    sys.stderr.flush()


def _idle_cell(r: Row) -> str:
    """The table's "idle e / g" cell: the GPU's idle time per call of eager calls / of graph replays, "-" if unmeasured."""
    if r.idle_time_s is None:
        return "-"
    graph = "-" if r.graph_idle_time_s is None else f"{r.graph_idle_time_s * 1e6:.1f}"
    return f"{r.idle_time_s * 1e6:.1f} / {graph} us"


def format_table(results: Sequence[BenchResult]) -> str:
    """A readable table of every row, with the device, ceilings and timing method first."""
    if not results:
        return "(no results)"
    first = results[0]
    c = first.ceilings
    matmul = ", ".join(f"{k} {v / 1e12:.0f} TFLOP/s" for k, v in c.matmul_flops_per_s.items())
    lines = [f"device: {first.device} | timing: {first.timing} | ceilings: copy {c.copy_bytes_per_s / 1e12:.2f} TB/s, {matmul}"]
    header = ("case", "backend", "tokens", "status", "time", "mode", "eager", "graph b2b", "host", "idle e / g", "TB/s", "TFLOP/s", "%copy",
              "%matmul", "rel err / detail")
    table = [header]
    for res in results:
        for r in res.rows:
            us = (lambda v: "-" if v is None else f"{v * 1e6:.1f} us")
            fmt = (lambda v, p=".2f": "-" if v is None else format(v, p))
            detail = f"{r.rel_err:.2e}" if r.status == "ok" and r.rel_err is not None else r.detail
            table.append((r.label or res.request.scheme.name, r.backend + ("*" if r.kind == "peer" else ""), str(r.tokens), r.status,
                          us(r.time_s), r.mode or "-", us(r.eager_time_s), us(r.graph_b2b_time_s), us(r.host_time_s), _idle_cell(r),
                          fmt(r.tbps), fmt(r.tflops, ".1f"), fmt(r.pct_copy, ".1f"), fmt(r.pct_matmul, ".1f"), detail))
    widths = [max(len(row[i]) for row in table) for i in range(len(header) - 1)]
    for row in table:
        lines.append("  ".join(row[i].ljust(widths[i]) for i in range(len(widths))) + "  " + row[-1])
    lines.append("* peer (not a registered backend); time: CUDA-graph replay where the backend is capturable (mode), else eager; "
                 "eager: per call, calls back to back; graph b2b: graph replays back to back, batches alternating with the "
                 "eager ones (eager - graph b2b: host work the GPU does not hide, and clock swings); host: time until one "
                 "eager call returns, GPU idle before it; idle e / g: GPU idle per call between the GPU activities of eager "
                 "calls / graph replays back to back, from the GPU's record (the host work it does not hide, unmoved by "
                 "clocks)")
    return "\n".join(lines)
