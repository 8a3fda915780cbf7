"""A/B: each prefill GEMM's tuned config with and without TMA_B (same run), via tune.tune_case."""
import dataclasses, sys, torch
from moe_core.presets import model
from moe_core.quant import scheme
from moe_core_triton import configs, tune
from moe_core_triton.kernel import TritonKernel

cases = [c.split(":") for c in sys.argv[1:]]
for preset, name, tokens in cases:
    tokens = int(tokens)
    cfg = model(preset).config()
    sch = scheme(name)
    k = TritonKernel(cfg, sch.weight_key, sch.activation_key)
    dev = torch.device("cuda")
    rows = tokens * cfg.top_k
    i, h = cfg.intermediate_size, cfg.hidden_size
    base = [k._config(dev, rows, i, h, 1, tokens), k._config(dev, rows, h, i, 2, tokens)]
    bk = 128 if sch.activation_key is not None else 64
    extra = [dataclasses.replace(b, TMA_B=True) for b in base] + [
        configs.LaunchConfig(128, 256, bk, 8, 8, 3, TMA_B=True), configs.LaunchConfig(128, 256, bk, 8, 8, 4, TMA_B=True),
        configs.LaunchConfig(128, 128, bk, 8, 8, 4, TMA_B=True), configs.LaunchConfig(128, 256, bk, 8, 8, 3),
        configs.LaunchConfig(256, 128, bk, 8, 8, 3, TMA_B=True)]
    print(f"== {preset} {name} {tokens}: tuned {base}", flush=True)
    tune.candidates = lambda *a, **kw: list(dict.fromkeys(base + extra))
    tune.tune_case(preset, name, tokens)
    torch.cuda.empty_cache()
