"""Compile every Triton kernel a layer launches for a CUDA architecture, on a machine without that GPU.

    python -m moe_core_triton.compile_check --arch 90 --scheme w4a16,mxfp4 [--tokens 1,300] [--batched]
        [--swap-ab] [--split-k N] [--tma-b] [--gate-up] [--mma-in-flight] [--fused] [--sizes 2048,768] [--stats]

The layer's forward runs on CPU tensors with each launch recorded instead of run; every distinct
recorded (kernel, argument specialization as Triton's JIT makes it, constexprs) is then compiled by
Triton's own compiler for ``cuda:<arch>``: frontend, layouts, LLVM and ptxas (``--stats``: shared
memory and the PTX's MMA, async-copy and shared-store counts). This catches what the Triton interpreter cannot,
such as code that only fails when compiled (a compiled kernel traces the statements after a
constexpr branch that returns; reshapes need power-of-two shapes). It compiles nothing when
TRITON_INTERPRET is set (the interpreter has no compiler): run it with that variable unset.
Exit status 0 when everything compiled, 1 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
from dataclasses import dataclass, replace

import torch

from moe_core.config import MoEConfig, ParallelConfig
from moe_core.presets import random_inputs, random_layer
from moe_core.quant import QuantDtype, scheme
from moe_core.routing import BatchedRouting
from moe_core_triton import configs
from moe_core_triton import kernel as kernel_module
from moe_core_triton.configs import FusedConfig, LaunchConfig
from moe_core_triton.kernel import TritonBatchedKernel, TritonKernel
from moe_core_triton.launch import Launcher


@dataclass(frozen=True)
class Launch:
    """One recorded launch: the kernel, how Triton specializes each runtime argument (its type, and a
    divisibility key such as "D" for multiples of 16, or the value where an argument becomes a constant:
    None, an int 1) and the launcher's options."""

    fn: object
    specialization: tuple[tuple[str, object], ...]
    options: tuple[tuple[str, object], ...]

    @property
    def name(self) -> str:
        return self.fn.__name__


def specialize(arg) -> tuple[str, object]:
    """(type, key) as Triton's JIT specializes ``arg`` at a launch (alignment and divisibility by 16)."""
    from triton._C.libtriton import native_specialize_impl
    from triton.backends.compiler import BaseBackend

    kind, key = native_specialize_impl(BaseBackend, arg, False, True, True)
    return (kind, arg) if kind == "constexpr" else (kind, key)


@contextlib.contextmanager
def recording():
    """While active, every :class:`Launcher` call is appended to the yielded list instead of launched."""
    launches: list[Launch] = []
    original = Launcher.__call__

    def record(self, grid, *args):
        launches.append(Launch(self.fn, tuple(specialize(a) for a in args), tuple(sorted(self._options.items()))))

    Launcher.__call__ = record
    try:
        yield launches
    finally:
        Launcher.__call__ = original


def layer_sizes(scheme_name: str) -> tuple[int, int]:
    """(hidden, intermediate) that are no multiple of the tiles: partial tiles and scale groups along K,
    except for fp4 weights, whose scale groups must tile K (4-bit codes need an even K: both are)."""
    key = scheme(scheme_name).weight_key
    return (224, 96) if key is not None and key.dtype is QuantDtype.FP4_E2M1 else (200, 72)


def with_launch_fields(kernel_cls: type[TritonKernel], only_gemm: int | None = None, **fields) -> type[TritonKernel]:
    """``kernel_cls`` with ``fields`` of every :class:`LaunchConfig` it picks overridden (e.g. ``SWAP_AB=True``), or of
    GEMM ``only_gemm``'s only (1 or 2), for checking variants the tuned data files may choose; the kernel then adjusts
    them as it adjusts a data file's (:meth:`TritonKernel.as_run`: the batched format runs without split K)."""

    class Overridden(kernel_cls):
        def _config(self, device, rows, n, k, gemm, tokens) -> LaunchConfig:
            chosen = super()._config(device, rows, n, k, gemm, tokens)
            return chosen if only_gemm not in (None, gemm) else self.as_run(replace(chosen, **fields), k, device, gemm)

    only = f"GEMM{only_gemm}: " if only_gemm is not None else ""
    Overridden.__name__ = f"{kernel_cls.__name__}[{only}{', '.join(f'{k}={v}' for k, v in fields.items())}]"
    return Overridden


def with_fused(kernel_cls: type[TritonKernel], fc: FusedConfig) -> type[TritonKernel]:
    """``kernel_cls`` running the one-launch layer with ``fc`` in every forward that can take it
    (``TritonKernel.fused_override``), whatever the data file says."""
    return type(f"{kernel_cls.__name__}[fused]", (kernel_cls,), {"fused_override": fc})


#: The one-launch layer's config --fused checks besides the data files' own: COLS below BLOCK_N and steps that do not
#: divide the test layer's sizes, so every masked path is compiled.
MASKED_FUSED = FusedConfig(BLOCK_M=16, BLOCK_N=32, COLS=24, BLOCK_K=64, BLOCK_H=64, num_warps=4, num_stages=3)


def fused_configs() -> list[FusedConfig]:
    """:data:`MASKED_FUSED` and every distinct config the tuned data files name under ``gemm=fused`` keys: a forward
    can launch any of them (:func:`moe_core_triton.configs.choose_fused`)."""
    return [MASKED_FUSED, *sorted(configs.every_fused_config() - {MASKED_FUSED}, key=repr)]


def launches_of(scheme_name: str, tokens: int, batched: bool, dtype: torch.dtype, sizes: tuple[int, int] | None = None,
                fused: FusedConfig | None = None, kernel_cls: type[TritonKernel] | None = None, **fields) -> list[Launch]:
    """The launches of one forward of an 8-expert layer of ``scheme_name`` (kernels not run); ``sizes``:
    (hidden, intermediate), by default :func:`layer_sizes`; ``fused``: the one-launch layer's config, for a forward
    that can take it (``TritonKernel.fused_override``); ``kernel_cls``: the kernel, by default the format's plugin
    kernel; ``fields`` override the launch configurations (:func:`with_launch_fields`)."""
    hidden, intermediate = sizes or layer_sizes(scheme_name)
    cfg = MoEConfig(8, 2, hidden, intermediate, dtype=dtype, parallel=ParallelConfig(use_batched_activation_format=batched))
    sch = scheme(scheme_name)
    kernel_cls = kernel_cls or (TritonBatchedKernel if batched else TritonKernel)
    if fields:
        kernel_cls = with_launch_fields(kernel_cls, **fields)
    if fused is not None:
        kernel_cls = with_fused(kernel_cls, fused)
    kernel = kernel_cls(cfg, sch.weight_key, sch.activation_key)
    weights = kernel.prepare_weights(random_layer(cfg, sch, device="cpu"))
    x, routing = random_inputs(cfg, tokens, device="cpu")
    if batched:
        counts = torch.full((cfg.local_num_experts,), tokens, dtype=torch.int32)
        x, routing = x.new_zeros(cfg.local_num_experts, tokens, hidden), BatchedRouting(counts)
    with recording() as launches:
        kernel.forward(x, weights, routing, expert_map=None, apply_router_weight_on_input=False)
    return launches


def compile_launch(launch: Launch, arch: int):
    """Compile one recorded launch for ``cuda:<arch>`` and return Triton's compiled kernel (its ``asm`` holds
    the PTX and cubin); raises the compiler's error."""
    import triton
    from triton.backends.compiler import BaseBackend, GPUTarget
    from triton.compiler import ASTSource

    options = dict(launch.options)
    compile_options = {k: options.pop(k) for k in ("num_warps", "num_stages", "launch_cooperative_grid") if k in options}
    params = launch.fn.arg_names
    runtime = params[: len(launch.specialization)]
    signature = {name: kind for name, (kind, _) in zip(runtime, launch.specialization)} | {name: "constexpr" for name in options}
    constexprs = {(params.index(name),): value for name, value in options.items()}
    attrs = {}
    for i, (kind, key) in enumerate(launch.specialization):
        if kind == "constexpr":  # None, or an int equal to 1
            constexprs[(i,)] = key
        elif isinstance(key, str) and key:
            attrs[(i,)] = BaseBackend.parse_attr(key)
    source = ASTSource
    if getattr(launch.fn, "is_gluon", lambda: False)():  # Gluon names its layouts: the module needs its warps first
        from triton.experimental.gluon._runtime import GluonASTSource as source
    return triton.compile(source(launch.fn, signature, constexprs=constexprs, attrs=attrs), target=GPUTarget("cuda", arch, 32),
                          options=compile_options)


#: Shared memory one block may use (bytes, the opt-in maximum) per compute capability: a kernel compiled
#: past it builds, but its launch fails with OutOfResources, so the check reports it as a failure.
SHARED_MEMORY_LIMIT = {80: 166912, 86: 101376, 87: 166912, 89: 101376, 90: 232448}


def shared_memory_problem(compiled, arch: int) -> str | None:
    """Why ``compiled`` could not launch on ``sm_<arch>`` for lack of shared memory; None when it fits
    (or the architecture's limit is not in :data:`SHARED_MEMORY_LIMIT`)."""
    limit, used = SHARED_MEMORY_LIMIT.get(arch), compiled.metadata.shared
    if limit is None or used <= limit:
        return None
    return f"OutOfResources: needs {used} bytes of shared memory, sm_{arch} allows {limit}: use fewer num_stages or smaller tiles"


#: PTX instructions counted by --stats: MMAs (Hopper's wgmma, Ampere-style mma.sync), per-thread async copies
#: into shared memory (the pipelined loads), tensor-memory-accelerator copies (TMA_B) and stores to shared
#: memory (layout conversions); the words' decodes: e2m1 words' rotations (:mod:`moe_core_triton.e2m1_words`) and
#: int4 words' shifts (:data:`moe_core_triton.int4_words.WORD_BF16_PTX`).
PTX_COUNTS = {"wgmma": r"wgmma\.mma_async", "mma.sync": r"mma\.sync", "cp.async": r"cp\.async\.c[ag]",
              "tma": r"cp\.async\.bulk\.tensor", "st.shared": r"st\.shared", "shf.wrap": r"shf\.r\.wrap",
              "int4.words": r"shr\.u32 t, "}


#: The launch options --stats prints as a GEMM's tile, "BLOCK_M x BLOCK_N x BLOCK_K".
TILE = ("BLOCK_M", "BLOCK_N", "BLOCK_K")


def ptx_stats(compiled) -> str:
    """Shared memory and the :data:`PTX_COUNTS` of a compiled kernel, on one line."""
    ptx = compiled.asm["ptx"]
    counts = " ".join(f"{name}={len(re.findall(pattern, ptx))}" for name, pattern in PTX_COUNTS.items())
    return f"shared={compiled.metadata.shared} {counts}"


def describe(exc: BaseException) -> str:
    """The compiler error in one line: where (a CompilationError's first line) and why (its cause)."""
    where = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    cause = exc.__cause__ or exc
    why = str(cause).strip().splitlines()[-1] if str(cause).strip() else ""
    return f"{type(cause).__name__}: {why}" + (f" ({where})" if where and where != why else "")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arch", type=int, default=90, help="compute capability as a number (80, 89, 90, ...)")
    parser.add_argument("--scheme", required=True, help="comma-separated schemes")
    parser.add_argument("--tokens", default="1", help="comma-separated token counts (each may pick other tiles)")
    parser.add_argument("--dtype", choices=("bfloat16", "float16"), default="bfloat16")
    parser.add_argument("--batched", action="store_true", help="the batched-experts kernel")
    parser.add_argument("--swap-ab", action="store_true", help="every GEMM with SWAP_AB (the transposed product)")
    parser.add_argument("--split-k", type=int, default=1, help="every GEMM's K loop split over this many programs")
    parser.add_argument("--tma-b", action="store_true", help="every GEMM that can loads its weight tiles by TMA")
    parser.add_argument("--gate-up", action="store_true", help="every GEMM1 that can takes gate and up rows in one tile (GATE_UP)")
    parser.add_argument("--mma-in-flight", action="store_true", help="every GEMM's K loop with no path around it (MMA_IN_FLIGHT)")
    parser.add_argument("--fused", action="store_true",
                        help="the one-launch layer (fused.py) with each of fused_configs(), where the forward can take it")
    parser.add_argument("--sizes", help="hidden,intermediate of the layer (default: sizes that are no multiple of the tiles)")
    parser.add_argument("--stats", action="store_true", help="print each kernel's shared memory and PTX instruction counts")
    args = parser.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        print("compile_check: unset TRITON_INTERPRET (the interpreter compiles nothing)", file=sys.stderr)
        return 2
    kernel_module.COMPILE_TARGET = args.arch  # the tiles then take the PTX paths the target GPU would (words_by_ptx)
    sizes = tuple(int(v) for v in args.sizes.split(",")) if args.sizes else None
    results: dict[Launch, str] = {}  # launch -> "ok" (with --stats: "ok <counts>") or "FAIL: <error>"
    for scheme_name in args.scheme.split(","):
        for tokens in (int(t) for t in args.tokens.split(",")):
            fields = ({"SWAP_AB": True} if args.swap_ab else {}) | ({"SPLIT_K": args.split_k} if args.split_k > 1 else {})
            fields |= ({"TMA_B": True} if args.tma_b else {}) | ({"MMA_IN_FLIGHT": True} if args.mma_in_flight else {})
            kernel_cls = TritonBatchedKernel if args.batched else TritonKernel
            kernel_cls = with_launch_fields(kernel_cls, 1, GATE_UP=True) if args.gate_up else kernel_cls
            forwards = [launches_of(scheme_name, tokens, args.batched, getattr(torch, args.dtype), sizes, fc, kernel_cls, **fields)
                        for fc in (fused_configs() if args.fused else [None])]
            for launch in (launch for launches in forwards for launch in launches):
                again = launch in results
                if not again:
                    try:
                        compiled = compile_launch(launch, args.arch)
                        problem = shared_memory_problem(compiled, args.arch)
                        results[launch] = f"FAIL: {problem}" if problem else "ok" + (f" {ptx_stats(compiled)}" if args.stats else "")
                    except Exception as exc:  # noqa: BLE001 - every compiler error is reported, then the next launch
                        results[launch] = f"FAIL: {describe(exc)}"
                status, _, detail = results[launch].partition(" ")
                options = dict(launch.options)
                tiles = " " + "x".join(str(options[b]) for b in TILE) if args.stats and set(TILE) <= set(options) else ""
                print(f"{status.rstrip(':'):4s}  {scheme_name} tokens={tokens} {launch.name}{tiles}{' (compiled above)' if again else ''}"
                      f"{': ' + detail if detail else ''}", flush=True)
    failed = sum(r.startswith("FAIL") for r in results.values())
    print(f"compile_check: {len(results) - failed} of {len(results)} kernels compiled for sm_{args.arch}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
