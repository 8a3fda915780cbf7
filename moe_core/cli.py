"""``moe-core``: list plugins, explain a selection, diagnose the install, run a layer."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from typing import Sequence

from moe_core.errors import MoECoreError


def _layer_args(p: argparse.ArgumentParser, multi: bool = False) -> None:
    """Layer flags; with ``multi``, --preset and --scheme take comma-separated lists."""
    from moe_core.presets import MODELS
    from moe_core.quant import SCHEMES
    from moe_core.platform import PRESETS

    g = p.add_argument_group("layer")
    lists = " (comma-separated list)" if multi else ""
    g.add_argument("--preset", choices=None if multi else sorted(MODELS), default="qwen3-30b-a3b", help=f"model whose MoE layer to describe: {', '.join(sorted(MODELS))}{lists}")
    g.add_argument("--experts", type=int, help="override the number of experts")
    g.add_argument("--top-k", type=int, help="override top-k")
    g.add_argument("--hidden", type=int, help="override the hidden size")
    g.add_argument("--intermediate", type=int, help="override the intermediate size")
    g.add_argument("--dtype", choices=["bfloat16", "float16", "float32"], default="bfloat16")
    g.add_argument("--activation", choices=["silu", "gelu"], default="silu")
    g.add_argument("--scheme", choices=None if multi else [s.name for s in SCHEMES], default="unquantized", help=f"quantization scheme{lists}")
    g.add_argument("--swiglu-limit", type=float, help="SwiGLU clamp limit")
    g.add_argument("--lora", action="store_true", help="LoRA adapters on the experts")
    g.add_argument("--batched", action="store_true", help="batched-experts activation format")
    g.add_argument("--ep", type=int, default=1, help="expert-parallel size (run: launch under torchrun --nproc-per-node N)")
    g.add_argument("--dispatch", default="auto", help="request an expert-parallel dispatcher by name")
    g.add_argument("--backend", default="auto", help="request a backend by name")
    g.add_argument("--platform", choices=sorted(PRESETS), help="simulate a platform instead of detecting this one")


def _config(args):
    import torch

    from moe_core.config import MoEConfig, ParallelConfig
    from moe_core.presets import model

    base = model(args.preset)
    return MoEConfig(
        num_experts=args.experts or base.num_experts,
        top_k=args.top_k or base.top_k,
        hidden_size=args.hidden or base.hidden_size,
        intermediate_size=args.intermediate or base.intermediate_size,
        dtype=getattr(torch, args.dtype),
        activation=args.activation,
        swiglu_limit=args.swiglu_limit,
        lora_enabled=args.lora,
        moe_backend=args.backend,
        parallel=ParallelConfig(ep_size=args.ep, use_batched_activation_format=args.batched, dispatch_backend=args.dispatch),
    )


def _platform(args):
    from moe_core.platform import preset

    return preset(args.platform) if args.platform else None


def cmd_list(args) -> int:
    from moe_core.registry import default_registry
    from moe_core.resolver import current_platform

    reg = default_registry()
    plat = current_platform()
    if args.json:
        print(json.dumps({
            "plugins": [{"name": p.name, "distribution": p.distribution, "version": p.version, "status": p.status.value, "error": p.error} for p in reg.plugins],
            "backends": [{"name": s.name, "family": s.family, "plugin": s.plugin, "priority": s.priority,
                          "family_priorities": {f.value: v for f, v in s.family_priorities},
                          "formats": sorted(f.value for f in s.formats), "devices": sorted(d.value for d in s.devices),
                          "quant_families": sorted(f.value for f in s.quant_families), "auto_select": s.auto_select,
                          "requires": {pkg: plat.has_package(pkg) for pkg in sorted(s.requires)},
                          "validation": dataclasses.asdict(s.validation) | {"summary": s.validation.describe()},
                          "description": s.description} for s in reg.specs.values()],
            "dispatchers": [{"name": d.name, "family": d.family, "plugin": d.plugin, "priority": d.priority,
                             "format": d.output_format.value, "host_sync": d.host_sync, "cuda_graph_safe": d.cuda_graph_safe,
                             "world_sizes": sorted(d.world_sizes), "devices": sorted(k.value for k in d.devices),
                             "auto_select": d.auto_select, "validation": d.validation.describe(),
                             "description": d.description} for d in reg.dispatchers.values()],
        }, indent=2))
        return 0
    print("Plugins:")
    for p in reg.plugins:
        err = f"  ({p.error})" if p.error else ""
        print(f"  {p.name:<20} {p.distribution} {p.version}  [{p.status.value}]{err}")
    print("Backends (higher priority is preferred):")
    for s in sorted(reg.specs.values(), key=lambda s: (-s.priority, s.name)):
        fams = ",".join(sorted(f.value for f in s.quant_families))
        manual = " manual-only" if not s.auto_select else ""
        print(f"  {s.name:<22} prio {s.priority:<5} family {s.family:<10} plugin {s.plugin:<12} schemes {fams}{manual}")
        if s.description:
            print(f"      {s.description}")
        print(f"      {_install_status(s, plat)}; {s.validation.describe()}")
    print("Expert-parallel dispatchers (higher priority is preferred):")
    for d in sorted(reg.dispatchers.values(), key=lambda d: (-d.priority, d.name)):
        print(f"  {d.name:<22} prio {d.priority:<5} family {d.family:<10} plugin {d.plugin:<12} {d.traits()}")
        if d.description:
            print(f"      {d.description}")
        print(f"      {_install_status(d, plat)}; {d.validation.describe()}")
    return 0


def _install_status(spec, plat) -> str:
    """Whether the packages a backend requires import here: 'installed', or which are missing."""
    missing = sorted(p for p in spec.requires if not plat.has_package(p))
    return f"not installed here (needs {', '.join(missing)}; see its plugin's README)" if missing else "installed"


def cmd_explain(args) -> int:
    from moe_core.pair import select_pair
    from moe_core.quant import scheme
    from moe_core.resolver import select

    sch = scheme(args.scheme)
    cfg = _config(args)
    choose = select_pair if cfg.parallel.use_ep else select
    selection = choose(cfg, sch.weight_key, sch.activation_key, platform=_platform(args), num_tokens=args.tokens)
    print(json.dumps(selection.to_dict(), indent=2) if args.json else selection.explain())
    return 0


def cmd_doctor(args) -> int:
    import torch

    from moe_core.platform import OPTIONAL_PACKAGES, package_versions
    from moe_core.registry import PluginStatus, default_registry
    from moe_core.resolver import current_platform

    plat = current_platform()
    reg = default_registry()
    print(f"platform: {plat.describe()}")
    print(f"torch: {torch.__version__}")
    for pkg in OPTIONAL_PACKAGES:
        found = package_versions(pkg) if plat.has_package(pkg) else ""
        print(f"  optional package {pkg:<11} {'importable' if plat.has_package(pkg) else 'missing'}" + (f" ({found})" if found else ""))
    bad = [p for p in reg.plugins if p.status is not PluginStatus.LOADED]
    print(f"plugins: {len(reg.plugins)} ({len(bad)} not loaded), backends: {len(reg.specs)}")
    for p in reg.plugins:
        print(f"  {p.name:<20} {p.distribution} {p.version}  [{p.status.value}]" + (f": {p.error}" if p.error else ""))
    print("backends:")
    for spec in sorted(reg.specs.values(), key=lambda s: s.name):
        print(f"  {spec.name:<20} {_install_status(spec, plat)}; {spec.validation.describe()}")
    print("dispatchers:")
    for d in sorted(reg.dispatchers.values(), key=lambda d: d.name):
        print(f"  {d.name:<20} {_install_status(d, plat)}; {d.validation.describe()}")
    for plugin, lines in reg.doctor_reports().items():
        print(f"{plugin}:")
        for line in lines:
            print(f"  {line}")
    problems = reg.problems
    if problems:
        print("plugin problems:")
        for pr in problems:
            print(f"  {pr}")
    rankings_ok = _print_rankings(plat, reg)
    failed = [p for p in bad if p.status is PluginStatus.FAILED]
    print("status: " + ("problems found (see above)" if failed or problems or not rankings_ok else "ok"))
    return 1 if failed or problems or not rankings_ok else 0


def _print_rankings(plat, reg) -> bool:
    """``doctor``'s list of the measured rankings in force on this machine, highest precedence first; False if one is unusable."""
    from moe_core import autotune
    from moe_core.env import parse_snapshot, snapshot
    from moe_core.errors import RankingFileError
    from moe_core.ranking_sources import in_force

    try:
        sources = in_force(plat.device_name, dict(snapshot()), reg)
    except RankingFileError as exc:
        print(f"rankings: {exc}")
        return False
    tuning = "on" if autotune.enabled(parse_snapshot(snapshot())) else "off (MOE_CORE_AUTOTUNE=1 or `moe-core tune` to measure)"
    print(f"rankings in force for {plat.device_name or plat.describe()} (the first covering a layer decides; autotuning {tuning}):")
    for source in sources:
        note = f"; {source.version_note}" if source.version_note else ""
        print(f"  {source.describe()}: {len(source.ranking.entries)} entries{note}")
    if not sources:
        print("  (none: static priorities decide)")
    return True


def cmd_tune(args) -> int:
    """Measure the eligible backends of each layer and token count on this machine into the autotune cache."""
    from moe_core import autotune, autotune_cache
    from moe_core.env import snapshot
    from moe_core.errors import InvalidConfigError
    from moe_core.quant import scheme
    from moe_core.registry import default_registry
    from moe_core.resolver import current_platform, select

    if args.platform:
        raise InvalidConfigError("moe-core tune measures this machine; drop --platform (a simulated platform cannot be timed)")
    plat, reg = current_platform(), default_registry()
    environ = dict(snapshot())
    tokens = [int(t) for t in args.tokens.split(",")]
    cases = [(p, s, t) for p in args.preset.split(",") for s in args.scheme.split(",") for t in tokens]
    command = "moe-core " + " ".join(sys.argv[1:])
    for step, (preset_name, scheme_name, count) in enumerate(cases, 1):
        args.preset = preset_name
        cfg, sch = _config(args), scheme(scheme_name)
        selection = select(cfg, sch.weight_key, sch.activation_key, platform=plat, registry=reg)
        eligible = [c.name for c in selection.candidates if c.eligible]
        sys.stderr.write(f"[{step}/{len(cases)}] {preset_name} {scheme_name} T={count}: {', '.join(eligible)} ...\n")
        result = autotune.tune(selection.query, eligible, count, reg, environ=environ, command=command, budget_s=args.budget_s)
        outcomes = ", ".join(f"{n} {o.value} ({why})" for n, (o, why) in result.outcomes.items())
        sys.stderr.write(f"    {result.elapsed_s:.2f} s: {outcomes}\n")
        print(f"{preset_name} {scheme_name} T={count}: {', '.join(result.order) or 'nothing timed'}")
    print(f"autotune cache: {autotune_cache.store(plat.device_name, environ).path}")
    return 0


def cmd_run(args) -> int:
    """The main job: select a backend for the layer and run one forward on random inputs."""
    import torch

    from moe_core.layer import MoELayer
    from moe_core.presets import random_inputs, random_layer
    from moe_core.quant import scheme

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    cfg = _config(args)
    sch = scheme(args.scheme)
    rank, group = 0, None
    if cfg.parallel.use_ep:
        rank, device, group = _join_process_group(args, device)
    print(f"building a random {args.preset} layer ({sch.name}) on {device} ...", flush=True)
    full = dataclasses.replace(cfg, parallel=dataclasses.replace(cfg.parallel, ep_size=1))
    weights = random_layer(full, sch, device=device, seed=args.seed).shard(rank, cfg.parallel.ep_size)
    layer = MoELayer(cfg, weights, sch.weight_key, sch.activation_key, platform=_run_platform(args, device), ep_group=group)
    if rank == 0:
        print(layer.pair.explain() if layer.pair is not None else layer.selection.explain())
    x, routing = random_inputs(cfg, args.tokens, device=device, seed=args.seed + 1 + rank)
    layer(x, routing)  # warm-up
    if device == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    out = layer(x, routing)
    if device == "cuda":
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    checksum = out.float().sum().item()
    via = layer.backend if layer.dispatcher_name is None else f"{layer.dispatcher_name} + {layer.backend}, rank {rank} of {cfg.parallel.ep_size}"
    print(f"output {tuple(out.shape)} {out.dtype}: checksum {checksum:.6f}, mean |y| {out.float().abs().mean().item():.6f}, "
          f"time {elapsed * 1e3:.2f} ms on {device} via {via}")
    if group is not None:
        torch.distributed.destroy_process_group()
    if not torch.isfinite(out).all():
        print("error: the output has NaN or inf", file=sys.stderr)
        return 1
    return 0


def _run_platform(args, device: str):
    """The platform to select for: --platform if given; this machine's CPU side for ``--device cpu`` on a GPU machine."""
    from moe_core.platform import DeviceKind, Platform
    from moe_core.resolver import current_platform

    chosen = _platform(args)
    if chosen is None and device == "cpu" and not current_platform().is_cpu():
        chosen = Platform(DeviceKind.CPU, None, "cpu", current_platform().packages)
    return chosen


def _join_process_group(args, device: str):
    """(rank, device, ExpertParallelGroup) of this process under torchrun; NCCL on GPUs, gloo on CPUs."""
    import os

    import torch
    import torch.distributed as dist

    from moe_core.dispatch.base import ExpertParallelGroup
    from moe_core.errors import InvalidConfigError

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world != args.ep:
        raise InvalidConfigError(f"--ep {args.ep} needs {args.ep} processes, this is one of {world}: launch it as "
                                 f"`torchrun --standalone --nproc-per-node {args.ep} -m moe_core.cli run --ep {args.ep} ...`")
    if device == "cuda":
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        device = f"cuda:{local}"
    dist.init_process_group("nccl" if device.startswith("cuda") else "gloo")
    return dist.get_rank(), device, ExpertParallelGroup(max_tokens_per_rank=args.tokens)


def cmd_bench(args) -> int:
    """Every available backend and the peers, checked against the reference, timed, against the roofline."""
    import torch

    from moe_core.bench import harness, report
    from moe_core.quant import scheme
    from moe_core.registry import default_registry
    from moe_core.resolver import current_platform

    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type != "cuda":
        print("note: no GPU in use: timing the CPU with a wall clock; only CPU-capable backends run", file=sys.stderr)
    tokens = tuple(int(t) for t in args.tokens.split(","))
    presets = args.preset.split(",")
    schemes = args.scheme.split(",")
    backends = tuple(args.backends.split(",")) if args.backends else None
    peers = tuple(p for p in args.peers.split(",") if p) if args.peers is not None else ("reference", "torch_grouped_mm")
    timer = harness.Timer(device.type)
    ceilings = harness.measure_ceilings(device, timer)
    platform = _platform(args) or current_platform()
    results = []
    for preset_name in presets:
        for name in schemes:
            args.preset = preset_name
            cfg = _config(args)
            req = harness.BenchRequest(cfg, scheme(name), tokens, backends, peers, args.input_sets, args.reference_max_tokens,
                                       cuda_graphs=not args.eager, seed=args.seed, label=f"{preset_name} {name}")
            results.append(harness.run(req, default_registry(), platform, device, timer=timer, ceilings=ceilings,
                                       progress=None if args.quiet else harness.stderr_progress))
    if not args.quiet:
        sys.stderr.write("\n")
    command = "moe-core " + " ".join(sys.argv[1:])
    if args.json:
        report.write_json(args.json, results, command)
    if args.csv:
        report.write_csv(args.csv, results)
    if args.plot:
        try:
            report.write_plot(args.plot, report.to_json(results, command), args.plot_metric)
        except RuntimeError as exc:
            print(f"warning: no plot written: {exc}", file=sys.stderr)
    if args.write_ranking:
        from moe_core.ranking import ranking_from_results

        ranking_from_results(results).save(args.write_ranking)
    print(harness.format_table(results))
    return 1 if any(r.status in ("failed", "error") for res in results for r in res.rows) else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="moe-core", description="Ranked, explained fused-MoE kernel selection.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log selection decisions (INFO) and rejections (DEBUG with -vv)")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("list", help="plugins, backends, priorities and load status")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_list)
    p = sub.add_parser("explain", help="which backend would run a layer, and why")
    _layer_args(p)
    p.add_argument("--json", action="store_true")
    p.add_argument("--tokens", type=int, help="token count, so a measured ranking (docs/ranking.md) can decide")
    p.set_defaults(func=cmd_explain)
    p = sub.add_parser("doctor", help="platform, optional packages, plugin load errors, rankings in force")
    p.set_defaults(func=cmd_doctor)
    p = sub.add_parser("tune", help="measure the eligible backends on this machine into the autotune cache (docs/ranking.md)")
    _layer_args(p, multi=True)
    p.add_argument("--tokens", default="1,16,64,256,1024,4096", help="comma-separated token counts")
    p.add_argument("--budget-s", type=float, default=2.0, help="start no backend after this many seconds per layer and token count")
    p.set_defaults(func=cmd_tune)
    p = sub.add_parser("bench", help="time every available backend against peers and the roofline")
    _layer_args(p, multi=True)
    p.add_argument("--tokens", default="1,16,64,256,1024,4096", help="comma-separated token counts")
    p.add_argument("--backends", help="comma-separated backends (default: every registered backend that supports the layer here)")
    p.add_argument("--peers", help="comma-separated peers: reference, torch_grouped_mm (default both; '' for none)")
    p.add_argument("--input-sets", type=int, default=3, help="input sets rotated while timing")
    p.add_argument("--reference-max-tokens", type=int, default=4096, help="time the (slow) reference only up to this many tokens")
    p.add_argument("--device", choices=["cpu", "cuda"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="write every row as JSON")
    p.add_argument("--csv", help="write every row as CSV")
    p.add_argument("--plot", help="write a PNG (needs matplotlib)")
    p.add_argument("--plot-metric", choices=["time", "roofline"], default="time")
    p.add_argument("--write-ranking", help="write the measured per-token-bucket order of backends (docs/ranking.md)")
    p.add_argument("--eager", action="store_true", help="time eager calls only (default: CUDA-graph replay where capturable)")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    p.set_defaults(func=cmd_bench)
    p = sub.add_parser("run", help="select and run one forward of a random layer")
    _layer_args(p)
    p.add_argument("--tokens", type=int, default=16)
    p.add_argument("--device", choices=["cpu", "cuda"])
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    import logging

    args = build_parser().parse_args(argv)
    if args.verbose:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        return args.func(args)
    except MoECoreError as exc:
        print(f"moe-core: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
