"""Session 44, on the CPU machine (triton 3.9): the PTX of the GEMM launches of four schemes at 1 and 300 tokens
(heuristic tiles), compiled for sm_90, debug lines stripped, hashed. Run with the package as committed before
MMA_IN_FLIGHT (renamed moe_core_triton_old, on PYTHONPATH) and with the final one: python ptx_same.py PACKAGE"""
import hashlib, re, sys, os, importlib
os.environ.pop("TRITON_INTERPRET", None)
import torch
pkg = sys.argv[1]
km = importlib.import_module(pkg + ".kernel"); cc = importlib.import_module(pkg + ".compile_check")
km.COMPILE_TARGET = 90
def strip(ptx):
    return "\n".join(l for l in ptx.splitlines() if not re.match(r"\s*(\.loc|\.file|//|\$L__|\.section|\.b8|\.b32 \d|\.b64 )", l))
for name in ("w4a16", "mxfp4", "fp8-block", "w8a16"):
    for t in (1, 300):
        for i, launch in enumerate(l for l in cc.launches_of(name, t, False, torch.bfloat16, (256, 128)) if l.name == "moe_gemm_kernel"):
            k = cc.compile_launch(launch, 90)
            print(name, t, i, hashlib.sha256(strip(k.asm["ptx"]).encode()).hexdigest()[:16])
