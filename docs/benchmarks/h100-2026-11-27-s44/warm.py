"""Compile (by one forward each) the Triton kernels of the layers named, with the plugin package named, so that the
Triton cache (TRITON_CACHE_DIR) holds their PTX for ptxas_check.py (session 44).

    python warm.py PACKAGE [presets=a,b] [schemes=a,b] [tokens=1,16]
"""
import importlib, sys, torch
from moe_core.presets import model, random_inputs, random_layer
from moe_core.quant import scheme

kernel = importlib.import_module(sys.argv[1] + ".kernel")
pick = {"presets": "qwen3-30b-a3b,mixtral-8x7b", "schemes": "w4a16", "tokens": "1,16,64"}
pick |= dict(a.split("=", 1) for a in sys.argv[2:])
for preset in pick["presets"].split(","):
    for name in pick["schemes"].split(","):
        cfg = model(preset).config()
        sch = scheme(name)
        k = kernel.TritonKernel(cfg, *sch.keys)
        w = k.prepare_weights(random_layer(cfg, sch, device="cuda"))
        for tokens in map(int, pick["tokens"].split(",")):
            x, r = random_inputs(cfg, tokens, device="cuda", seed=tokens)
            k.apply(x, w, r)
        del k, w
        torch.cuda.empty_cache()
torch.cuda.synchronize()
print("warm", sys.argv[1:], "done")
