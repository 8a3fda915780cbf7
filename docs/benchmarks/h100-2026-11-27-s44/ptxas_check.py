"""ptxas's verdict on every compiled moe_gemm_kernel in a Triton cache directory (session 44): whether it serializes
the kernel's wgmma instructions (message C7515, "wgmma.mma_async instructions are serialized due to ..."), and the
registers it uses. Runs the ptxas Triton bundles, on the PTX Triton wrote, for sm_90a.

    python ptxas_check.py CACHE_DIR [KERNEL_NAME]
"""
import collections, glob, json, os, re, subprocess, sys
import triton

cache, name = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "moe_gemm_kernel"
binaries = os.path.dirname(triton.__file__) + "/backends/nvidia/bin/"
ptxas = binaries + "ptxas"
print("ptxas:", subprocess.run([ptxas, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1])
verdicts = collections.Counter()
for ptx in sorted(glob.glob(f"{cache}/*/{name}.ptx")):
    meta = json.load(open(ptx[:-4] + ".json"))
    out = subprocess.run([ptxas, "-arch=sm_90a", "-v", ptx, "-o", "/dev/null"], capture_output=True, text=True)
    log = out.stdout + out.stderr
    regs = re.search(r"Used (\d+) registers", log)
    why = re.search(r"serialized due to (.*?) in the function", log)
    verdicts["serialized" if why else "async"] += 1
    print(f"{os.path.basename(os.path.dirname(ptx))[:12]} warps {meta.get('num_warps')} stages {meta.get('num_stages')} "
          f"shared {meta.get('shared')} regs {regs.group(1) if regs else '?'} {'SERIALIZED: ' + why.group(1) if why else ''}")
print(dict(verdicts))
