"""sm_90 SASS of a gated weight-only GEMM1 tile, main loop and epilogue counted apart (session 40; CPU machine, triton 3.9).

    python gate_up_sass.py SCHEME MxNxK WARPS STAGES GATE_UP(0|1)   (from plugins/triton_backend)
"""
import re, sys, collections, os, subprocess, tempfile, torch
import moe_core_triton.compile_check as cc
name = sys.argv[1]; bm, bn, bk = map(int, sys.argv[2].split("x")); warps, stages = int(sys.argv[3]), int(sys.argv[4]); gu = sys.argv[5] == "1"
b = os.path.dirname(__import__("triton").__file__) + "/backends/nvidia/bin/"
kc = cc.with_launch_fields(cc.with_launch_fields(cc.TritonKernel, 1, GATE_UP=gu), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=warps, num_stages=stages, SWAP_AB=True)
for launch in cc.launches_of(name, 64, False, torch.bfloat16, (2048, 768), kernel_cls=kc):
    if launch.name != "moe_gemm_kernel" or not dict(launch.options)["GATED"]:
        continue
    k = cc.compile_launch(launch, 90)
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(k.asm["cubin"])
    sass = subprocess.run([b + "cuobjdump", "-sass", f.name], capture_output=True, text=True).stdout
    lines = re.findall(r"/\*([0-9a-f]{4,})\*/\s+(.*?);", sass)
    best = None
    for a, ins in lines:
        m = re.search(r"\bBRA\b.*?0x([0-9a-f]+)", ins)
        if m and int(m.group(1), 16) < int(a, 16):
            n = int(a, 16) - int(m.group(1), 16)
            if best is None or n > best[0]:
                best = (n, int(m.group(1), 16), int(a, 16))
    after = [ins for a, ins in lines if int(a, 16) > best[2]]
    loop = [ins for a, ins in lines if best[1] <= int(a, 16) <= best[2]]
    def cnt(body):
        ops = collections.Counter(re.sub(r"^@!?U?P\w+\s+", "", i).split()[0].split(".")[0] for i in body)
        return {o: ops[o] for o in ("STS", "LDS", "STSM", "STL", "LDL", "SHFL", "PRMT", "MOV")}
    print(name, sys.argv[2], "GATE_UP" if gu else "two acc", "loop", len(loop), cnt(loop), "| after loop", len(after), cnt(after))
