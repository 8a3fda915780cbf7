"""Roofline model of one MoE forward, and ceilings measured on the device at hand."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from moe_core.config import MoEConfig
from moe_core.quant import QuantDtype, QuantKey, ScaleDtype
from moe_core.routing import Routing
from moe_core.bench.timing import Timer

_BITS = {QuantDtype.FP8_E4M3: 8, QuantDtype.INT8: 8, QuantDtype.INT4: 4, QuantDtype.FP4_E2M1: 4}


@dataclass(frozen=True)
class Work:
    """The least a forward must do: bytes moved through memory, and floating-point operations (a mean over input
    sets, :func:`mean_work`: ``touched_experts`` may then be fractional)."""

    bytes: float
    flops: float
    touched_experts: float


_SCALE_BYTES = {ScaleDtype.FP32: 4, ScaleDtype.FP8_E4M3: 1, ScaleDtype.E8M0: 1}


def _metadata_bytes(weight_key: QuantKey, n: int, k: int) -> float:
    """Bytes of one expert's [n, k] weight matrix besides its codes: scales, zero points, a global scale."""
    rows = n if weight_key.group.rows == -1 else weight_key.group.rows
    cols = k if weight_key.group.cols == -1 else weight_key.group.cols
    count = -(-n // rows) * -(-k // cols)
    per_group = _SCALE_BYTES[weight_key.scale_dtype] + (0 if weight_key.symmetric else 1)
    return count * per_group + (4 if weight_key.global_scale else 0)


def work(cfg: MoEConfig, weight_key: QuantKey | None, routing: Routing) -> Work:
    """Bytes = touched experts' weights (codes, scales, zero points) + input + output + routing; FLOPs = 2 * pairs * 3HI."""
    touched = int(torch.unique(routing.topk_ids).numel())
    h, i = cfg.hidden_size, cfg.intermediate_size
    elem = torch.finfo(cfg.dtype).bits / 8
    wbytes = elem if weight_key is None else _BITS[weight_key.dtype] / 8
    weights = touched * 3 * h * i * wbytes
    if weight_key is not None:
        weights += touched * (_metadata_bytes(weight_key, 2 * i, h) + _metadata_bytes(weight_key, h, i))
    tokens = routing.num_tokens
    activations = 2 * tokens * h * elem + routing.topk_ids.numel() * (routing.topk_ids.element_size() + routing.topk_weights.element_size())
    return Work(weights + activations, 2.0 * routing.topk_ids.numel() * 3 * h * i, touched)


@dataclass(frozen=True)
class Ceilings:
    """Measured device limits: copy bandwidth (bytes read + written per second) and dense matmul rates."""

    copy_bytes_per_s: float
    matmul_flops_per_s: dict[str, float]
    device: str

    def to_dict(self) -> dict:
        return {"device": self.device, "copy_TBps": self.copy_bytes_per_s / 1e12, "matmul_TFLOPs": {k: v / 1e12 for k, v in self.matmul_flops_per_s.items()}}


def mean_work(cfg: MoEConfig, weight_key: QuantKey | None, routings: Sequence[Routing]) -> Work:
    """The mean :func:`work` of ``routings``: what one run does on average when the timing cycles through them, as
    ``moe-core bench`` cycles its input sets. With few tokens the sets touch different numbers of experts (two
    Mixtral-8x7B tokens: 3 or 4 of 8), so the first set's bytes alone misstate the runs timed."""
    works = [work(cfg, weight_key, routing) for routing in routings]
    return Work(*(sum(getattr(w, f) for w in works) / len(works) for f in ("bytes", "flops", "touched_experts")))


def measure_ceilings(device: torch.device, timer: Timer, size: int = 8192) -> Ceilings:
    """Copy bandwidth (1 GiB buffers on a GPU) and dense matmul rates (size^3) for bf16, and fp8 where supported."""
    gpu = device.type == "cuda"
    n_bytes = (1 << 30) if gpu else (64 << 20)
    src = torch.empty(n_bytes, dtype=torch.uint8, device=device).random_(0, 255)
    dst = torch.empty_like(src)
    copy_s = timer.time(lambda: dst.copy_(src))
    rates = {}
    n = size if gpu else 1024
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    rates["bf16"] = 2 * n**3 / timer.time(lambda: a @ b)
    if gpu and torch.cuda.get_device_capability(device) >= (8, 9) and hasattr(torch, "_scaled_mm"):
        a8 = a.to(torch.float8_e4m3fn)
        b8 = b.t().contiguous().to(torch.float8_e4m3fn).t()
        one = torch.ones((), device=device)
        rates["fp8"] = 2 * n**3 / timer.time(lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16))
    name = torch.cuda.get_device_name(device) if gpu else "cpu"
    return Ceilings(2 * n_bytes / copy_s, rates, name)
