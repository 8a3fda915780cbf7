"""For every GEMM entry of the H100 data file (weight-only schemes and unquantized, the token counts given), compile the
launch it makes for sm_90 and ask ptxas whether it serializes the kernel's wgmma (C7515), and its registers.
    python survey_sm90.py [PTXAS|-] [TOKENS,..]   (from plugins/triton_backend; ONLY_GEMM=1 or 2 for one GEMM)"""
import json, os, re, subprocess, sys, tempfile, collections
import torch
import moe_core_triton.kernel as kmod
kmod.COMPILE_TARGET = 90
from moe_core_triton import compile_check as cc
from moe_core_triton.kernel import TritonKernel
b = os.path.dirname(__import__("triton").__file__) + "/backends/nvidia/bin/"
ptxas = sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] != "-" else (b + "ptxas-blackwell" if os.path.exists(b + "ptxas-blackwell") else b + "ptxas")
want = [int(t) for t in sys.argv[2].split(",")] if len(sys.argv) > 2 else [1, 16, 64, 4096]
import moe_core_triton
data = json.load(open(os.path.join(os.path.dirname(moe_core_triton.__file__), "configs/nvidia_h100_80gb_hbm3.json")))
print("package", moe_core_triton.__file__)
only = os.environ.get("ONLY_GEMM")
sizes = {(128, 768, 2048): (2048, 768), (128, 2048, 768): (2048, 768), (8, 14336, 4096): (4096, 2048), (8, 4096, 14336): (4096, 2048),
         (32, 2880, 2880): (2880, 2880)}
bad = collections.Counter()
for key, table in sorted(data.items()):
    f = dict(kv.split("=") for kv in key.split(","))
    if f["gemm"] == "fused":
        continue
    shape = (int(f["E"]), int(f["N"]), int(f["K"]))
    if shape not in sizes:
        continue
    for tokens in want:
        entry = table.get(str(tokens))
        if not entry:
            continue
        gemm = int(f["gemm"])
        if only and int(only) != gemm:
            continue
        try:
            cls = cc.with_launch_fields(TritonKernel, only_gemm=gemm, **entry)
            launches = cc.launches_of(f["scheme"], tokens, False, torch.bfloat16, sizes[shape], kernel_cls=cls)
        except Exception as e:
            print(key, tokens, "ERROR", type(e).__name__, str(e)[:200]); continue
        for launch in launches:
            o = dict(launch.options)
            if launch.name != "moe_gemm_kernel" or bool(o["GATED"]) != (gemm == 1):
                continue
            k = cc.compile_launch(launch, 90)
            with tempfile.NamedTemporaryFile(suffix=".ptx", delete=False, mode="w") as fh:
                fh.write(k.asm["ptx"])
            r = subprocess.run([ptxas, "-arch=sm_90a", "-v", fh.name, "-o", "/dev/null"], capture_output=True, text=True).stderr
            os.unlink(fh.name)
            regs = re.search(r"Used (\d+) registers", r)
            spill = re.search(r"(\d+) bytes spill stores", r)
            ser = "SERIALIZED" if "C7515" in r else ""
            why = re.search(r"serialized due to (.*?) in the function", r)
            tile = "x".join(str(o[t]) for t in ("BLOCK_M", "BLOCK_N", "BLOCK_K"))
            print(f"{f['scheme']:16s} E={shape[0]:3d} gemm{gemm} T={tokens:5d} {tile:12s} w{o['num_warps']} s{o['num_stages']} "
                  f"swap={int(o['SWAP_AB'])} sad={int(o.get('SCALE_AFTER_DOT', 0))} unroll={o.get('UNROLL')} splitk={o['SPLIT_K']} "
                  f"regs={regs.group(1) if regs else '?'} spill={spill.group(1) if spill else '?'} {ser} {why.group(1)[:60] if why else ''}", flush=True)
            if ser:
                bad[f["scheme"]] += 1
            break
print("serialized:", dict(bad))
