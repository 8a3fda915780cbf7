"""Session 42, on the CPU machine (triton 3.9): the PTX of every kernel a set of forwards launches (GEMMs, block tables, reductions), compiled for sm_90 / sm_80 without a GPU, debug lines stripped, hashed per launch. Run before and after a refactor (with an empty TRITON_CACHE_DIR after) and compare the two files: python ptx_identity.py OUT.json"""
import hashlib, json, re, sys, os
os.environ.pop("TRITON_INTERPRET", None)
import torch
from moe_core_triton import kernel as kernel_module
from moe_core_triton.compile_check import compile_launch, launches_of, with_launch_fields
from moe_core_triton.kernel import TritonKernel
from moe_core_triton.plugin import BATCHED_SCHEMES, STANDARD_SCHEMES, WEIGHT_ONLY_SCHEMES
out = {}
def strip(ptx):
    keep = [l for l in ptx.splitlines() if not re.match(r"\s*(\.loc|\.file|//|\$L__|\.section|\.b8|\.b32 \d|\.b64 )", l)]
    return "\n".join(keep)
runs = []
for arch, dtype, schemes, tokens, extra in (
        (90, torch.bfloat16, WEIGHT_ONLY_SCHEMES, (1, 16, 300), {}),
        (90, torch.bfloat16, WEIGHT_ONLY_SCHEMES, (300,), {"SWAP_AB": True}),
        (90, torch.bfloat16, WEIGHT_ONLY_SCHEMES, (300,), {"gate_up": True, "SWAP_AB": True}),
        (90, torch.bfloat16, STANDARD_SCHEMES, (1, 300), {}),
        (80, torch.float16, ("unquantized",) + tuple(WEIGHT_ONLY_SCHEMES), (1, 300), {}),
        (90, torch.float16, WEIGHT_ONLY_SCHEMES, (1, 300), {"SWAP_AB": True})):
    kernel_module.COMPILE_TARGET = arch
    fields = dict(extra); gate_up = fields.pop("gate_up", False)
    cls = with_launch_fields(TritonKernel, 1, GATE_UP=True) if gate_up else TritonKernel
    for name in schemes:
        for t in tokens:
            for launch in launches_of(name, t, False, dtype, (256, 128), None, cls, **fields):
                key = f"sm{arch} {dtype} {name} {t} {extra} {launch.name} {sorted(launch.options)}"
                if key in out: continue
                try:
                    k = compile_launch(launch, arch)
                    out[key] = hashlib.sha256(strip(k.asm["ptx"]).encode()).hexdigest()
                except Exception as e:
                    out[key] = "FAIL " + type(e).__name__
json.dump(out, open(sys.argv[1], "w"), indent=0)
print(len(out), "kernels", sum(v.startswith("FAIL") for v in out.values()), "failed")
