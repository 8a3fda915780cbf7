"""Session 38: where the sorted intermediate's time goes: each kernel of one forward (torch.profiler, mean of 5 forwards)
with the intermediate by pair and in table order, and ptxas's register and spill report of both GEMMs of each, compiled
for sm_90a by this machine's Triton.

    python sorted_profile.py [preset:scheme:tokens ...]
"""
import os
import subprocess
import sys
import tempfile

import torch
import triton

from moe_core.presets import model, random_inputs, random_layer
from moe_core.quant import scheme
from moe_core_triton.compile_check import compile_launch, recording
from moe_core_triton.kernel import TritonKernel

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from ws_probe import profiled_forwards  # noqa: E402

PTXAS = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas")


def ptxas_report(launch) -> str:
    ptx = compile_launch(launch, 90).asm["ptx"]
    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
        f.write(ptx)
    done = subprocess.run([PTXAS, "-v", "-arch=sm_90a", f.name, "-o", os.devnull], capture_output=True, text=True)
    lines = [ln.split("info    :")[-1].strip() for ln in (done.stdout + done.stderr).splitlines() if "spill" in ln or "registers" in ln]
    return " ; ".join(lines) or (done.stdout + done.stderr)[-300:]


def main(argv):
    print(f"{torch.cuda.get_device_name()}; torch {torch.__version__}; triton {triton.__version__}", flush=True)
    for case in argv or ["qwen3-30b-a3b:fp8-block:4096", "mixtral-8x7b:fp8-block:4096", "qwen3-30b-a3b:unquantized:4096"]:
        preset, name, tokens = case.split(":")
        tokens = int(tokens)
        cfg, sch = model(preset).config(), scheme(name)
        raw = random_layer(cfg, sch, device="cuda", seed=0)
        x, routing = random_inputs(cfg, tokens, device="cuda", seed=tokens)
        for sort in (False, True):
            kernel = TritonKernel(cfg, sch.weight_key, sch.activation_key)
            kernel.sorted_intermediate = sort
            weights = kernel.prepare_weights(raw)
            prof = profiled_forwards(kernel, x, weights, routing)
            events = [e for e in prof.events() if e.device_time_total > 0]
            per = len(events) // 5
            print(f"{preset} {name} T={tokens} {'sorted' if sort else 'by pair'}: " + ", ".join(
                f"{events[i].name[:18]} {sum(events[j * per + i].device_time_total for j in range(5)) / 5:.1f}" for i in range(per)),
                flush=True)
            kernel.replays = False  # every launch through its Launcher, which recording() sees
            with recording() as launches:
                kernel.apply(x, weights, routing)
            for i, launch in enumerate(l for l in launches if l.fn.__name__ == "moe_gemm_kernel"):
                print(f"    GEMM{i + 1}: {ptxas_report(launch)}", flush=True)
            del kernel, weights
        del raw
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main(sys.argv[1:])
