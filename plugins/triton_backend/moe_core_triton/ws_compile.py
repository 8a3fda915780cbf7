"""Compile the warp-specialized Gluon decode layer (ws_decode.py) for sm_90 on a machine without that GPU, and say
what its PTX and cubin hold.

    python -m moe_core_triton.ws_compile [--tokens 1,16,64] [--sizes 2048,768] [--experts 128] [--top-k 8] [--dtype bfloat16]

Each token count picks its :class:`~moe_core_triton.ws_plan.DecodePlan`; the kernel is then compiled as a launch of
that plan would compile it (:func:`moe_core_triton.compile_check.compile_launch`: Triton's own compiler and ptxas),
and one line reports its shared memory, its registers (from the cubin, by the cuobjdump that ships with triton), the
producer's and consumer's register counts (``setmaxnreg``) and the counts of :data:`WS_PTX`. It needs triton 3.6 with
Gluon (ws_spec.installed_triton_reason); TRITON_INTERPRET must be unset. Exit status 0 when every plan compiled and
its PTX holds each instruction of :data:`WS_PTX`, 1 otherwise, 2 when this triton cannot build the kernel.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass

import torch

from moe_core.routing_guard import RoutingErrorCounter
from moe_core_triton.blocks import BlockTable, pair_table, table_words
from moe_core_triton.compile_check import SHARED_MEMORY_LIMIT, Launch, compile_launch, specialize
from moe_core_triton.ws_plan import DecodePlan, decode_plan
from moe_core_triton.ws_spec import installed_triton_reason

#: What the design puts in the PTX: register reallocation between the partitions, Hopper's asynchronous MMA, TMA
#: loads of the weight tiles, and waits on the ring's mbarriers.
WS_PTX = {"setmaxnreg": r"setmaxnreg\.(?:inc|dec)", "wgmma": r"wgmma\.mma_async", "tma": r"cp\.async\.bulk\.tensor",
          "mbarrier.try_wait": r"mbarrier\.try_wait"}


@dataclass(frozen=True)
class CompiledPlan:
    """One compiled plan: its shared memory (bytes), registers per thread (cubin), the ``setmaxnreg`` targets, in
    order of appearance, and the count of each :data:`WS_PTX` instruction."""

    tokens: int
    plan: DecodePlan
    shared: int
    registers: int | None
    setmaxnreg: tuple[int, ...]
    counts: dict

    @property
    def problems(self) -> list[str]:
        """What is wrong with it: a missing instruction, or more shared memory than sm_90 gives a block."""
        missing = [f"no {name} in the PTX" for name, count in self.counts.items() if not count]
        over = [f"{self.shared} bytes of shared memory, sm_90 allows {SHARED_MEMORY_LIMIT[90]}"] if self.shared > SHARED_MEMORY_LIMIT[90] else []
        return missing + over

    def line(self) -> str:
        counts = " ".join(f"{name}={count}" for name, count in self.counts.items())
        return (f"tokens={self.tokens} block_m={self.plan.block_m} stages={self.plan.stages} pair_items={self.plan.pair_items} shared={self.shared} "
                f"registers={self.registers} partition_registers={sorted(set(self.setmaxnreg))} {counts}")


def decode_launch(tokens: int, experts: int, top_k: int, hidden: int, intermediate: int, dtype: torch.dtype) -> tuple[DecodePlan, Launch]:
    """The plan for ``tokens`` tokens of this layer and the :class:`Launch` it makes, from CPU tensors (nothing runs)."""
    from moe_core_triton.ws_decode import weight_descriptors, ws_decode_args, ws_decode_kernel

    plan = decode_plan(tokens, hidden, intermediate, torch.empty((), dtype=dtype).element_size())
    if plan is None:
        raise ValueError(f"the decode layer cannot take hidden={hidden}, intermediate={intermediate} (ws_plan.size_problems)")
    pairs = tokens * top_k
    table = pair_table(torch.zeros(pairs, dtype=torch.int32), experts, experts, plan.block_m, errors=RoutingErrorCounter("topk_ids", "ids"))
    if not plan.pair_items:
        table = BlockTable(torch.zeros(table_words(table.capacity, plan.block_m), dtype=torch.int32), table.capacity, pairs, plan.block_m)
    w13 = torch.empty(experts, 2 * intermediate, hidden, dtype=dtype)
    w2 = torch.empty(experts, hidden, intermediate, dtype=dtype)
    x, out = torch.empty(tokens, hidden, dtype=dtype), torch.empty(tokens, hidden, dtype=dtype)
    words, barrier = torch.zeros(tokens * hidden, dtype=torch.int32), torch.zeros(2, dtype=torch.int32)
    _, args, constexprs = ws_decode_args(plan, x, weight_descriptors(w13, w2), torch.empty(pairs), table, intermediate, top_k,
                                         words, barrier, out, sms=132)
    return plan, Launch(ws_decode_kernel, tuple(specialize(a) for a in args), tuple(sorted(constexprs.items())))


def cubin_registers(cubin: bytes) -> int | None:
    """Registers per thread of the cubin's one kernel, by triton's cuobjdump; None where it cannot say."""
    from triton import knobs

    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        try:
            usage = subprocess.run([knobs.nvidia.cuobjdump.path, "--dump-resource-usage", f.name], capture_output=True, text=True,
                                   timeout=60).stdout
        except (OSError, subprocess.SubprocessError):
            return None
    found = re.search(r"REG:(\d+)", usage)
    return int(found.group(1)) if found else None


def compile_plan(tokens: int, experts: int = 128, top_k: int = 8, hidden: int = 2048, intermediate: int = 768,
                 dtype: torch.dtype = torch.bfloat16) -> CompiledPlan:
    """Compile the decode layer for sm_90 as a forward of ``tokens`` tokens would launch it (default: Qwen3-30B-A3B's
    layer); raises the compiler's error."""
    plan, launch = decode_launch(tokens, experts, top_k, hidden, intermediate, dtype)
    compiled = compile_launch(launch, 90)
    ptx = compiled.asm["ptx"]
    return CompiledPlan(tokens, plan, compiled.metadata.shared, cubin_registers(compiled.asm["cubin"]),
                        tuple(int(n) for n in re.findall(r"setmaxnreg\.(?:inc|dec)\.sync\.aligned\.u32\s+(\d+)", ptx)),
                        {name: len(re.findall(pattern, ptx)) for name, pattern in WS_PTX.items()})


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", default="1,16,64", help="comma-separated token counts")
    parser.add_argument("--sizes", default="2048,768", help="hidden,intermediate (default: Qwen3-30B-A3B)")
    parser.add_argument("--experts", type=int, default=128)
    parser.add_argument("--top-k", type=int, default=8)
    parser.add_argument("--dtype", choices=("bfloat16", "float16"), default="bfloat16")
    args = parser.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        print("ws_compile: unset TRITON_INTERPRET (the interpreter compiles nothing)", file=sys.stderr)
        return 2
    reason = installed_triton_reason()
    if reason:
        print(f"ws_compile: cannot build the kernel here: {reason}", file=sys.stderr)
        return 2
    hidden, intermediate = (int(v) for v in args.sizes.split(","))
    failed = 0
    for tokens in (int(t) for t in args.tokens.split(",")):
        try:
            compiled = compile_plan(tokens, args.experts, args.top_k, hidden, intermediate, getattr(torch, args.dtype))
        except Exception as exc:  # noqa: BLE001 - every compiler error is reported, then the next plan
            from moe_core_triton.compile_check import describe

            print(f"FAIL  tokens={tokens}: {describe(exc)}", flush=True)
            failed += 1
            continue
        problems = compiled.problems
        failed += bool(problems)
        print(f"{'FAIL' if problems else 'ok':4s}  {compiled.line()}{': ' + '; '.join(problems) if problems else ''}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
