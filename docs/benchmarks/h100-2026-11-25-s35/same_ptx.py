"""Session 35: the PTX (line information and debug sections left out) of 40 weight-only GEMM launches, decode and
prefill, bf16 and fp16, compiled for sm_90 on the CPU machine, from the plugin before a change (moe_core_triton_old
on PYTHONPATH) and after it: identical or not. Run from plugins/triton_backend with TRITON_INTERPRET unset."""
import hashlib, importlib, sys, torch
res = {}
for pkg in ("moe_core_triton_old", "moe_core_triton"):
    cc = importlib.import_module(pkg + ".compile_check")
    out = []
    for name in ("w4a16", "w4a16-zp", "w8a16-zp", "mxfp4", "fp8-w8a16"):
        for tokens, fields in ((1, dict(BLOCK_M=16, SWAP_AB=True)), (300, dict(BLOCK_M=64, SWAP_AB=True))):
            for dtype in (torch.bfloat16, torch.float16):
                for launch in cc.launches_of(name, tokens, False, dtype, (2048, 768), **fields):
                    if launch.name != "moe_gemm_kernel":
                        continue
                    ptx = cc.compile_launch(launch, 90).asm["ptx"]
                    body = "\n".join(l for l in ptx[ptx.index(".entry"):ptx.find(".section", ptx.index(".entry"))].splitlines()
                                      if not l.strip().startswith((".loc", ".file", "//", "$L__")) and "debug" not in l)
                    out.append((name, tokens, str(dtype), hashlib.sha1(body.encode()).hexdigest()[:12]))
    res[pkg] = out
print(len(res["moe_core_triton"]), "kernels;", "identical PTX bodies" if res["moe_core_triton"] == res["moe_core_triton_old"] else "DIFFERENT")
for a, b in zip(res["moe_core_triton_old"], res["moe_core_triton"]):
    if a != b: print(a, b)
