"""SASS of the weight-only GEMM's main loop (the largest backward-branch body) for a scheme at a tile: instruction mix per K step.

    python loop_sass.py PACKAGE SCHEME TOKENS MxNxK WARPS STAGES SWAP_AB [DTYPE]   (from plugins/triton_backend)
"""
import re, sys, collections, importlib, os, subprocess, tempfile, dataclasses
import torch
pkg, name, tokens = sys.argv[1], sys.argv[2], int(sys.argv[3])
tile = [int(v) for v in sys.argv[4].split("x")]
warps, stages, swap = int(sys.argv[5]), int(sys.argv[6]), sys.argv[7] == "1"
dtype = getattr(torch, sys.argv[8]) if len(sys.argv) > 8 else torch.bfloat16
cc = importlib.import_module(pkg + ".compile_check")
LaunchConfig = importlib.import_module(pkg + ".configs").LaunchConfig

fields = dict(BLOCK_M=tile[0], BLOCK_N=tile[1], BLOCK_K=tile[2], num_warps=warps, num_stages=stages, SWAP_AB=swap)
names = {f.name for f in dataclasses.fields(LaunchConfig)}
fields = {k: v for k, v in fields.items() if k in names}
b = os.path.dirname(__import__("triton").__file__) + "/backends/nvidia/bin/"
b = b if os.path.exists(b + "cuobjdump") else ""
for launch in cc.launches_of(name, tokens, False, dtype, (2048, 768), **fields):
    if launch.name != "moe_gemm_kernel":
        continue
    k = cc.compile_launch(launch, 90)
    opts = dict(launch.options)
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(k.asm["cubin"])
    sass = subprocess.run([b + "cuobjdump", "-sass", f.name], capture_output=True, text=True).stdout
    lines = re.findall(r"/\*([0-9a-f]{4,})\*/\s+(.*?);", sass)
    addr = [int(a, 16) for a, _ in lines]
    # loops: backward branches BRA to a lower address
    best = None
    for i, (a, ins) in enumerate(lines):
        m = re.search(r"BRA\s+(?:`\(\.L_x_\d+\)\s*)?0x([0-9a-f]+)", ins) or re.search(r"BRA\s+`?\(?\.?L?_?x?_?\d*\)?\s*", "")
        m = re.search(r"\bBRA\b.*?0x([0-9a-f]+)", ins)
        if m and int(m.group(1), 16) < int(a, 16):
            n = (int(a, 16) - int(m.group(1), 16)) // 16
            if best is None or n > best[0]:
                best = (n, int(m.group(1), 16), int(a, 16))
    body = [ins for a, ins in lines if best and best[1] <= int(a, 16) <= best[2]]
    ops = collections.Counter(re.sub(r"^@!?U?P\w+\s+", "", ins).split()[0] for ins in body)
    print(name, str(dtype)[6:], "GATED" if opts["GATED"] else "GEMM2", "x".join(str(opts[t]) for t in ("BLOCK_M", "BLOCK_N", "BLOCK_K")),
          "swap", opts["SWAP_AB"], "w", opts["num_warps"], "s", opts["num_stages"], "shared", k.metadata.shared, "loop", len(body))
    print("   ", sorted(((v, kk) for kk, v in ops.items()), reverse=True)[:24])
