"""The binding's calls against fake vLLM modules whose functions have exactly the recorded signatures.

The fakes live in this test only: they are inserted into ``sys.modules`` for one test and never registered.
Plumbing only: ``fused_marlin_moe`` returns zeros and the scale conversions stand in for vLLM's, so the
assertions check what the binding hands vLLM (read back by :func:`gptq_codes` and the documented
layouts, written here independently of the binding) and that it passes vLLM's results on unchanged,
never the fakes' arithmetic. tests/test_marlin_gpu.py checks the numerics on a GPU with vLLM.
"""

import sys
import types
from dataclasses import dataclass, field

import dataclasses

import pytest
import torch

from moe_core.config import MoEConfig
from moe_core.errors import KernelInputError
from moe_core.provider import FunctionContract
from moe_core.quant import scheme
from moe_core.routing import Routing
from moe_core.weights import quantize_experts
from moe_core_marlin import contract
from moe_core_marlin.kernel import MarlinKernel
from moe_core_marlin.layout import fp4_words, gptq_pack, unsigned_codes
from moe_core_marlin.provider import MarlinUnavailableError

E, H, I, T, K_TOP = 4, 128, 128, 5, 2
CFG = MoEConfig(num_experts=E, top_k=K_TOP, hidden_size=H, intermediate_size=I, dtype=torch.bfloat16)
SCALAR_IDS = {"uint4b8": 11, "uint4": 12, "uint8b128": 13, "float8_e4m3fn": 14, "float4_e2m1f": 15}
#: Marlin's fp4 scale layout swaps the middle two of every four columns (a self-inverse permutation).
FOUR = [0, 2, 1, 3]


@dataclass
class FakeVllm:
    """Fake provider modules recording every call, bound to the recorded signature."""

    calls: list = field(default_factory=list)
    outputs: list = field(default_factory=list)

    def fake(self, record, result):
        sig = record.signature()

        def call(*args, **kwargs):
            bound = sig.bind(*args, **kwargs)  # TypeError when the binding's call does not match the record
            self.calls.append((record.name, bound.arguments))
            out = result(**bound.arguments)
            self.outputs.append((record.name, out))
            return out

        call.__signature__ = sig
        return call

    def install(self, monkeypatch):
        def repack(b_q_weight, perm, size_k, size_n, num_bits, **_):
            return torch.zeros((b_q_weight.shape[0], size_k // 16, size_n * num_bits // 2), dtype=torch.int32)

        def zero_points(zp, size_k, size_n, num_bits, **_):
            return torch.zeros((size_k, size_n * num_bits // 32), dtype=torch.int32)

        def pack_fp8(fp8_tensor, size_k_first=True):
            # What vLLM's helper computes for size_k_first=False: the [N, K] bytes read as int32 [N, K/4].
            assert fp8_tensor.dtype == torch.float8_e4m3fn and fp8_tensor.ndim == 2 and not size_k_first
            return fp8_tensor.contiguous().view(torch.int32)

        def fold_exponent_bias(scales):
            # 2**(target exponent bits - 1) - 2**(4 - 1): 8 for float16, 120 for bfloat16, in the scales' dtype.
            bias = {torch.float16: 8, torch.bfloat16: 120}[scales.dtype]
            return scales * torch.full_like(scales, 2.0) ** bias

        def nvfp4_scales(marlin_scales):
            # vLLM's conversion to "S0E5M3", written from its description: half, columns [0, 2, 1, 3] in fours,
            # times 2**7, the sign bit shifted out, the high byte of each half kept as a float8_e4m3fn byte.
            assert marlin_scales.ndim == 2 and marlin_scales.dtype in (torch.float16, torch.bfloat16)
            rows = marlin_scales.shape[0]
            half = marlin_scales.to(torch.float16).reshape(-1, 4)[:, FOUR].reshape(rows, -1)
            shifted = (half * 2.0**7).view(torch.int16) << 1
            return shifted.view(torch.float8_e4m3fn)[:, 1::2].contiguous()

        def mxfp4_scales(marlin_scales, input_dtype=None):
            assert marlin_scales.ndim == 2 and input_dtype is None  # 16-bit activations only here
            rows = marlin_scales.shape[0]
            return marlin_scales.reshape(-1, 4)[:, FOUR].reshape(rows, -1).to(torch.float8_e8m0fnu)

        def nvfp4_global_scale(global_scale):
            assert global_scale.dtype in (torch.float16, torch.bfloat16)  # as vLLM's helper asserts
            target = 5 if global_scale.dtype == torch.float16 else 8
            return global_scale * 2.0 ** (2 ** (target - 1) - 2 ** (2 - 1) - 7)

        modules = {
            contract.GPTQ_MARLIN_MOE_REPACK: repack,
            contract.MARLIN_MOE_PERMUTE_SCALES: lambda s, **_: s,
            contract.MARLIN_ZERO_POINTS: zero_points,
            contract.FUSED_MARLIN_MOE: lambda hidden_states, **_: torch.zeros_like(hidden_states),
            contract.PACK_FP8_TO_INT32: pack_fp8,
            contract.FP8_FUSED_EXPONENT_BIAS_INTO_SCALES: fold_exponent_bias,
            contract.NVFP4_MARLIN_PROCESS_SCALES: nvfp4_scales,
            contract.MXFP4_MARLIN_PROCESS_SCALES: mxfp4_scales,
            contract.NVFP4_MARLIN_PROCESS_GLOBAL_SCALE: nvfp4_global_scale,
        }
        assert set(modules) == set(contract.READ_AT), "every recorded function has a fake"
        for record, result in modules.items():
            module = sys.modules.get(record.module)
            if not isinstance(module, types.ModuleType) or not getattr(module, "__fake__", False):
                module = types.ModuleType(record.module)
                module.__fake__ = True
                monkeypatch.setitem(sys.modules, record.module, module)
            setattr(module, record.name, self.fake(record, result))
        scalar_module = types.ModuleType(contract.SCALAR_TYPES_MODULE)
        setattr(scalar_module, contract.SCALAR_TYPES_ATTR, types.SimpleNamespace(**{n: types.SimpleNamespace(id=i) for n, i in SCALAR_IDS.items()}))
        monkeypatch.setitem(sys.modules, contract.SCALAR_TYPES_MODULE, scalar_module)

    def named(self, name):
        return [args for n, args in self.calls if n == name]

    def returned(self, name):
        return [out for n, out in self.outputs if n == name]


def gptq_codes(words: torch.Tensor, bits: int) -> torch.Tensor:
    """GPTQ's documented packing read back: int32 [E, K * bits / 32, N] -> unsigned codes [E, K, N], code k of a
    column in bits ``bits * (k % (32 / bits))`` of word ``k // (32 / bits)``."""
    per_word = 32 // bits
    w = words.to(torch.int64) & 0xFFFFFFFF
    return torch.stack([(w >> (bits * i)) & ((1 << bits) - 1) for i in range(per_word)], dim=2).flatten(1, 2)


def nibbles(data: torch.Tensor) -> torch.Tensor:
    """moe-core's documented 4-bit layout read back: uint8 [E, N, K/2] -> codes [E, N, K], element 2j in the low nibble."""
    d = data.to(torch.int64)
    return torch.stack((d & 15, d >> 4), dim=-1).flatten(-2)


def run(name, monkeypatch, cfg=CFG, magnitude=1.0, edit=None):
    fake = FakeVllm()
    fake.install(monkeypatch)
    keys = scheme(name).keys
    gen = torch.Generator().manual_seed(0)
    w13, w2 = torch.randn(E, 2 * I, H, generator=gen) * magnitude, torch.randn(E, H, I, generator=gen) * magnitude
    weights = quantize_experts(w13, w2, keys[0])
    if edit is not None:
        weights = edit(weights)
    kernel = MarlinKernel(cfg, *keys)
    prepared = kernel.prepare_weights(weights)
    fake.weights = weights
    x = torch.randn(T, H, generator=gen).to(cfg.dtype)
    routing = Routing(topk_ids=torch.randint(0, E, (T, K_TOP), generator=gen), topk_weights=torch.rand(T, K_TOP, generator=gen))
    out = kernel.apply(x, prepared, routing)
    return fake, prepared, out


@pytest.mark.parametrize("name, bits", [("w4a16", 4), ("w4a16-zp", 4), ("w8a16", 8)])
def test_calls_bind_to_the_record_with_the_right_shapes(monkeypatch, name, bits):
    fake, prepared, out = run(name, monkeypatch)
    assert out.shape == (T, H) and out.dtype == torch.bfloat16
    repacks = fake.named("gptq_marlin_moe_repack")
    assert [(a["size_k"], a["size_n"]) for a in repacks] == [(H, 2 * I), (I, H)]  # w13 then w2
    for a, wname in zip(repacks, ("w13", "w2")):
        assert a["num_bits"] == bits and a["perm"].shape == (E, 0) and a["perm"].dtype == torch.int32
        assert a["b_q_weight"].dtype == torch.int32 and a["b_q_weight"].shape == (E, a["size_k"] * bits // 32, a["size_n"])
        data = getattr(fake.weights, wname)
        # vLLM's scalar types: uint4b8 = q + 8 (moe-core's symmetric nibbles already are), uint4 = the zero-point
        # codes, uint8b128 = q + 128 for moe-core's int8 codes.
        codes = nibbles(data) if bits == 4 else data.to(torch.int64) + 128
        assert torch.equal(gptq_codes(a["b_q_weight"], bits), codes.transpose(1, 2))
    for a in fake.named("marlin_moe_permute_scales"):
        assert a["s"].shape == (E, a["size_k"] // 128, a["size_n"]) and a["s"].dtype == torch.bfloat16 and a["group_size"] == 128
    zero_calls = fake.named("marlin_zero_points")
    assert len(zero_calls) == (2 * E if name == "w4a16-zp" else 0)
    for a in zero_calls:
        assert a["zp"].dtype == torch.int32 and a["zp"].shape == (a["size_k"], a["size_n"]) and a["num_bits"] == bits
    (call,) = fake.named("fused_marlin_moe")
    assert call["w1"] is prepared.w13 and call["w2"] is prepared.w2
    assert call["quant_type_id"] == SCALAR_IDS[contract.SCALAR_TYPE_BY_SCHEME[name]]
    assert call["topk_weights"].dtype == torch.float32 and call["topk_ids"].dtype == torch.int32
    assert call["activation"] == "silu" and call["global_num_experts"] == E
    assert (call["w1_zeros"] is None) == (name != "w4a16-zp")


def test_every_record_names_the_commit_it_was_read_from():
    records = [v for v in vars(contract).values() if isinstance(v, FunctionContract)]
    assert set(records) == set(contract.READ_AT)
    assert all(len(commit) == 40 and int(commit, 16) >= 0 for commit in contract.READ_AT.values())
    assert contract.READ_AT[contract.PACK_FP8_TO_INT32] == contract.VLLM_MARLIN_FP8_UTILS_COMMIT


@pytest.mark.parametrize("name, group, block_n", [("fp8-w8a16", -1, 1), ("fp8-block-w8a16", 128, 128)])
def test_fp8_calls_bind_to_the_record_with_the_right_layouts(monkeypatch, name, group, block_n):
    fake, prepared, out = run(name, monkeypatch)
    assert out.shape == (T, H) and out.dtype == torch.bfloat16
    sizes = [(H, 2 * I), (I, H)]  # (size_k, size_n): w13 then w2
    packs = fake.named("pack_fp8_to_int32")
    assert len(packs) == 2 * E
    for i, a in enumerate(packs):
        size_k, size_n = sizes[i // E]
        assert a["fp8_tensor"].dtype == torch.float8_e4m3fn and a["fp8_tensor"].shape == (size_n, size_k)
        assert a["size_k_first"] is False
    repacks = fake.named("gptq_marlin_moe_repack")
    assert [(a["size_k"], a["size_n"]) for a in repacks] == sizes
    for a, wname in zip(repacks, ("w13", "w2")):
        assert a["num_bits"] == 8 and a["perm"].shape == (E, 0) and a["perm"].dtype == torch.int32
        assert a["b_q_weight"].dtype == torch.int32 and a["b_q_weight"].shape == (E, a["size_k"] // 4, a["size_n"])
        # vLLM's byte packing is GPTQ packing of the raw fp8 bytes: code k in bits 8 * (k % 4) of word k // 4.
        raw = getattr(fake.weights, wname).view(torch.uint8)
        assert torch.equal(gptq_codes(a["b_q_weight"], 8), raw.to(torch.int64).transpose(1, 2))
    permutes = fake.named("marlin_moe_permute_scales")
    folds = fake.named("fp8_fused_exponent_bias_into_scales")
    assert len(permutes) == len(folds) == 2
    for a, fold, wname in zip(permutes, folds, ("w13", "w2")):
        size_k, size_n = a["size_k"], a["size_n"]
        groups = 1 if group == -1 else size_k // 128
        assert a["s"].shape == (E, groups, size_n) and a["s"].dtype == torch.bfloat16 and a["group_size"] == group
        scale = getattr(fake.weights, f"{wname}_scale")  # canonical: [E, N, 1] or [E, N/128, K/128]
        n = torch.arange(size_n)
        expected = scale[:, n // block_n, :].transpose(1, 2) if block_n > 1 else scale.transpose(1, 2)
        assert torch.equal(a["s"], expected.to(torch.bfloat16))
        assert fold["scales"] is a["s"]  # the fake permutation is the identity; the fold comes after it
    folded = fake.returned("fp8_fused_exponent_bias_into_scales")
    assert prepared.w13_scale is folded[0] and prepared.w2_scale is folded[1]  # vLLM's result, unchanged
    (call,) = fake.named("fused_marlin_moe")
    assert call["quant_type_id"] == SCALAR_IDS["float8_e4m3fn"]
    assert call["w1"] is prepared.w13 and call["w1_scale"] is prepared.w13_scale and call["w2_scale"] is prepared.w2_scale
    assert call["w1_zeros"] is None and call["w2_zeros"] is None and call.get("input_dtype") is None  # 16-bit activations: no fp8 input quantization


def test_fp8_scales_that_overflow_float16_after_the_exponent_fold_are_refused(monkeypatch):
    cfg = MoEConfig(num_experts=E, top_k=K_TOP, hidden_size=H, intermediate_size=I, dtype=torch.float16)
    run("fp8-w8a16", monkeypatch, cfg=cfg)  # ordinary scales fit: amax / 448 * 2**8
    with pytest.raises(KernelInputError, match="overflows torch.float16"):
        run("fp8-w8a16", monkeypatch, cfg=cfg, magnitude=1e5)  # scales ~ 1e3 * 2**8 > 65504


FP4_CASES = [("nvfp4-w4a16", torch.bfloat16), ("nvfp4-w4a16", torch.float16), ("mxfp4", torch.bfloat16)]


@pytest.mark.parametrize("name, dtype", FP4_CASES, ids=lambda v: str(v).replace("torch.", ""))
def test_fp4_calls_bind_to_the_record_with_the_right_layouts(monkeypatch, name, dtype):
    cfg = dataclasses.replace(CFG, dtype=dtype)
    nvfp4 = name == "nvfp4-w4a16"
    group = 16 if nvfp4 else 32
    fake, prepared, out = run(name, monkeypatch, cfg=cfg)
    assert out.shape == (T, H) and out.dtype == dtype
    sizes = [(H, 2 * I), (I, H)]  # (size_k, size_n): w13 then w2
    repacks = fake.named("gptq_marlin_moe_repack")
    assert [(a["size_k"], a["size_n"]) for a in repacks] == sizes
    for a, wname in zip(repacks, ("w13", "w2")):
        assert a["num_bits"] == 4 and a["perm"].shape == (E, 0) and a["perm"].dtype == torch.int32
        assert a["b_q_weight"].dtype == torch.int32 and a["b_q_weight"].shape == (E, a["size_k"] // 8, a["size_n"])
        data = getattr(fake.weights, wname)  # canonical uint8 [E, N, K/2], element 2j in the low nibble
        # What vLLM's prepare_moe_fp4_layer_for_marlin hands the repack: each expert's bytes as int32, transposed.
        assert torch.equal(a["b_q_weight"], torch.stack([d.view(torch.int32).T for d in data]))
        # ... which is GPTQ packing of the canonical codes: code k in bits 4 * (k % 8) of word k // 8.
        assert torch.equal(gptq_codes(a["b_q_weight"], 4), nibbles(data).transpose(1, 2))
    permutes = fake.named("marlin_moe_permute_scales")
    assert len(permutes) == 2
    for a, wname in zip(permutes, ("w13", "w2")):
        size_k, size_n = a["size_k"], a["size_n"]
        assert a["group_size"] == group and a["s"].shape == (E, size_k // group, size_n) and a["s"].dtype == dtype
        scale = getattr(fake.weights, f"{wname}_scale")  # [E, N, K/group]: e4m3 or biased e8m0 exponents
        expected = scale.float() if nvfp4 else torch.exp2(scale.float() - 127)
        assert torch.equal(a["s"], expected.transpose(1, 2).to(dtype))
    processed = fake.named("nvfp4_marlin_process_scales" if nvfp4 else "mxfp4_marlin_process_scales")
    assert len(processed) == 2 * E
    for i, a in enumerate(processed):
        size_k, size_n = sizes[i // E]
        assert a["marlin_scales"].shape == (size_k // group, size_n) and a["marlin_scales"].dtype == dtype
        assert nvfp4 or a["input_dtype"] is None
        scale = getattr(fake.weights, ("w13_scale", "w2_scale")[i // E])[i % E]  # this expert's [N, K/group]
        block_value = scale.float() if nvfp4 else torch.exp2(scale.float() - 127)  # e4m3, or a biased e8m0 exponent
        assert torch.equal(a["marlin_scales"], block_value.T.to(dtype))
    assert not fake.named("mxfp4_marlin_process_scales" if nvfp4 else "nvfp4_marlin_process_scales")
    (call,) = fake.named("fused_marlin_moe")
    assert call["quant_type_id"] == SCALAR_IDS["float4_e2m1f"]
    assert call["w1"] is prepared.w13 and call["w1_scale"] is prepared.w13_scale and call["w2_scale"] is prepared.w2_scale
    assert call["w1_zeros"] is None and call.get("input_dtype") is None
    converted = fake.returned("nvfp4_marlin_process_scales" if nvfp4 else "mxfp4_marlin_process_scales")
    for j, wname in enumerate(("w13", "w2")):  # vLLM's per-expert results, stacked and passed on unchanged
        assert torch.equal(getattr(prepared, f"{wname}_scale"), torch.stack(converted[j * E:(j + 1) * E]))
    if nvfp4:
        globals_in = fake.named("nvfp4_marlin_process_global_scale")
        globals_out = fake.returned("nvfp4_marlin_process_global_scale")
        for wname, arg, given_, got in zip(("w13", "w2"), ("global_scale1", "global_scale2"), globals_in, globals_out):
            # moe-core's per-expert fp32 global scale [E, 1, 1], as one value per expert in the activation dtype
            assert torch.equal(given_["global_scale"], getattr(fake.weights, f"{wname}_global_scale").reshape(E).to(dtype))
            assert call[arg] is getattr(prepared, f"{wname}_global_scale") is got
    else:
        assert call["global_scale1"] is None and call["global_scale2"] is None
        assert not fake.named("nvfp4_marlin_process_global_scale")


def test_nvfp4_subnormal_block_scales_are_refused(monkeypatch):
    def tiny(weights):  # one e4m3 subnormal block scale (2**-8): Marlin's S0E5M3 form cannot hold it
        scale = weights.w2_scale.clone()
        scale[1, 3, 2] = torch.tensor(2.0**-8).to(torch.float8_e4m3fn)
        return dataclasses.replace(weights, w2_scale=scale)

    with pytest.raises(KernelInputError, match=r"1 nvfp4 block scale\(s\) are negative or below 2\*\*-6"):
        run("nvfp4-w4a16", monkeypatch, edit=tiny)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_nvfp4_global_scales_that_leave_the_dtype_after_the_bias_are_refused(monkeypatch, dtype):
    cfg = dataclasses.replace(CFG, dtype=dtype)
    run("nvfp4-w4a16", monkeypatch, cfg=cfg, magnitude=1e5)  # global ~ 4.5e5 / 2688 ~ 170: * 2**7 or * 2**119 fits
    with pytest.raises(KernelInputError, match=f"leaves the {dtype} range"):
        run("nvfp4-w4a16", monkeypatch, cfg=cfg, magnitude=1e6)  # ~ 1.7e3: past 65504 / 2**7 and 2**128 / 2**119


def test_nvfp4_global_scales_that_underflow_float16_are_refused(monkeypatch):
    with pytest.raises(KernelInputError, match="leaves the torch.float16 range"):
        run("nvfp4-w4a16", monkeypatch, cfg=dataclasses.replace(CFG, dtype=torch.float16), magnitude=1e-5)  # ~ 2e-9 -> 0
    run("nvfp4-w4a16", monkeypatch, magnitude=1e-5)  # bfloat16 holds it


def test_fp4_words_is_gptq_packing_of_the_canonical_nibbles():
    data = torch.randint(0, 256, (2, 8, 16), dtype=torch.uint8)
    assert torch.equal(gptq_codes(fp4_words(data), 4), nibbles(data).transpose(1, 2))
    with pytest.raises(ValueError, match="multiple of 8"):
        fp4_words(data[..., :6])


def test_gptq_pack_puts_code_k_in_bits_of_word_k_div_pack():
    codes = torch.randint(0, 16, (2, 8, 16))
    assert torch.equal(gptq_codes(gptq_pack(codes, 4), 4).transpose(1, 2), codes)
    nibbles = torch.tensor([[[0x21, 0x43]]], dtype=torch.uint8)
    assert unsigned_codes(nibbles, 4).tolist() == [[[1, 2, 3, 4]]]


def test_typed_error_when_vllm_is_absent(monkeypatch):
    for record in (contract.GPTQ_MARLIN_MOE_REPACK, contract.FUSED_MARLIN_MOE):
        monkeypatch.setitem(sys.modules, record.module, None)
    keys = scheme("w4a16").keys
    weights = quantize_experts(torch.randn(E, 2 * I, H), torch.randn(E, H, I), keys[0])
    with pytest.raises(MarlinUnavailableError, match="pip install vllm"):
        MarlinKernel(CFG, *keys).prepare_weights(weights)
