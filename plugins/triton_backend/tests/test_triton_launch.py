"""The direct-launch cache (moe_core_triton.launch): a cached launch is never reused for arguments
that triton would specialise differently, and the layer stays right whichever path a launch takes.

The key property runs on any machine against triton's own specialisation function; the launches
themselves run compiled on a GPU (the interpreter always takes triton's path).
"""

import pytest
import torch
import triton
import triton.language as tl
from hypothesis import given, settings
from hypothesis import strategies as st
from triton._C.libtriton import native_specialize_impl
from triton.backends.compiler import BaseBackend
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor as GluonTensorDescriptor
from triton.tools.tensor_descriptor import TensorDescriptor

from moe_core import quant
from moe_core.config import MoEConfig
from moe_core.numerics import relative_error, tolerance
from moe_core.presets import random_inputs, random_layer
from moe_core.reference.kernel import ReferenceKernel
from moe_core.routing import Routing
from moe_core_triton.blocks import next_power_of_2
from moe_core_triton.kernel import TritonKernel
from moe_core_triton import launch
from moe_core_triton.launch import Launcher

GPU = torch.cuda.is_available()
DEVICE = "cuda" if GPU else "cpu"


@triton.jit
def _scale_kernel(x_ptr, out_ptr, n, factor, stride, BLOCK: tl.constexpr, TWICE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs * stride, mask=offs < n, other=0.0)
    y = x * factor
    if TWICE:
        y = y * 2
    tl.store(out_ptr + offs, y, mask=offs < n)


INTS = [0, 1, 2, 15, 16, 17, 32, -1, -16, 2**31 - 1, 2**31, 2**32, 2**63, 2**64 - 1]
DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.int32, torch.int64, torch.float8_e4m3fn]


#: Byte offsets of a tensor view into its buffer: multiples of 16, so the key exists (misaligned
#: pointers have none: test_a_misaligned_pointer_has_no_key).
ALIGNED_BYTES = [0, 16, 32, 64]


def _tensor(dtype, offset_bytes):
    return torch.zeros(128, dtype=dtype)[offset_bytes // dtype.itemsize:]


def _descriptor(dtype, block_shape, rows, swizzle=None):
    """Triton's descriptor of a [rows, 64] matrix, or with ``swizzle`` (bytes) Gluon's, whose shared-memory layout
    triton specialises on (its blocks' rows at least one swizzle wide, as Gluon asks)."""
    base, shape, strides = torch.zeros(rows, 64, dtype=dtype), [rows, 64], [64, 1]
    if swizzle is None:
        return TensorDescriptor(base, shape, strides, list(block_shape))
    layout = gl.NVMMASharedLayout(swizzle_byte_width=swizzle, element_bitwidth=8 * dtype.itemsize, rank=2)
    return GluonTensorDescriptor(base, shape, strides, [block_shape[0], max(block_shape[1], swizzle // dtype.itemsize)], layout)


DESCRIPTOR_DTYPES = [torch.float16, torch.bfloat16, torch.float8_e4m3fn]
BLOCK_SHAPES = [(16, 16), (16, 32), (32, 16)]
#: None: triton's descriptor; else a Gluon descriptor of that swizzle width.
SWIZZLES = [None, 32, 64]
SCALAR = st.one_of(st.sampled_from(INTS), st.sampled_from([0.0, 1.0, 1.5]), st.booleans(), st.none())
TENSOR = st.builds(_tensor, st.sampled_from(DTYPES), st.sampled_from(ALIGNED_BYTES))
DESCRIPTOR = st.builds(_descriptor, st.sampled_from(DESCRIPTOR_DTYPES), st.sampled_from(BLOCK_SHAPES), st.sampled_from([32, 48]),
                       st.sampled_from(SWIZZLES))
ARG = st.one_of(SCALAR, TENSOR, DESCRIPTOR)


@st.composite
def _variant(draw, arg):
    """An argument the key may not tell from ``arg``: a tensor elsewhere in memory or a descriptor of other rows,
    mostly of the same dtype (and block shape, class and layout), sometimes of another."""
    if isinstance(arg, torch.Tensor):
        dtype = draw(st.sampled_from([arg.dtype] * 12 + DTYPES))
        return _tensor(dtype, draw(st.sampled_from(ALIGNED_BYTES)))
    dtype = draw(st.sampled_from([arg.base.dtype] * 9 + DESCRIPTOR_DTYPES))
    block = draw(st.sampled_from([tuple(arg.block_shape)] * 9 + BLOCK_SHAPES))
    swizzle = arg.layout.swizzle_byte_width if isinstance(arg, GluonTensorDescriptor) else None
    return _descriptor(dtype, block, draw(st.sampled_from([32, 48])), draw(st.sampled_from([swizzle] * 9 + SWIZZLES)))


def _triton_spec(args):
    return [native_specialize_impl(BaseBackend, a, False, True, True) for a in args]


def _same(spec_a, spec_b) -> bool:
    return all(x[0] == y[0] and (x[1] == y[1] if x[0] != "constexpr" else x[1] == y[1] and type(x[1]) is type(y[1]))
               for x, y in zip(spec_a, spec_b))


def test_equal_keys_mean_equal_triton_specializations():
    """Change one tensor or descriptor argument: whenever the key stays the same, triton's specialisation does too.

    Scalars are part of the key by value, so only a tensor or descriptor can change unseen; most examples
    keep the key (and reach the assertion), the rest change a dtype or block shape the key must see."""
    launcher = Launcher(_scale_kernel, num_warps=4, BLOCK=32, TWICE=False)
    reached = []

    @settings(max_examples=300, deadline=None)
    @given(st.lists(ARG, max_size=7), st.one_of(TENSOR, DESCRIPTOR), st.data())
    def prop(args, changing, data):
        args = [*args, changing]
        args.insert(data.draw(st.integers(0, len(args) - 1)), args.pop())
        index = next(i for i, a in enumerate(args) if a is changing)
        other = list(args)
        other[index] = data.draw(_variant(changing))
        key_a, key_b = launcher.key(tuple(args), 0), launcher.key(tuple(other), 0)
        reached.append(key_a is not None and key_a == key_b)
        if reached[-1]:
            assert _same(_triton_spec(args), _triton_spec(other)), (args, other)

    prop()
    assert sum(reached) > len(reached) / 2, f"only {sum(reached)} of {len(reached)} examples kept the key"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float8_e4m3fn])
def test_gluon_descriptors_that_differ_only_in_layout_have_different_keys(dtype):
    """Triton specialises a Gluon descriptor on its shared-memory layout: a launch cached for one layout must not be
    reused for another (the property test above rarely draws two layouts with one block shape)."""
    launcher = Launcher(_scale_kernel, num_warps=4, BLOCK=32, TWICE=False)
    narrow, wide = (_descriptor(dtype, (16, 128 // dtype.itemsize), 32, swizzle) for swizzle in (64, 128))
    assert narrow.block_shape == wide.block_shape and narrow.layout != wide.layout
    assert not _same(_triton_spec([narrow]), _triton_spec([wide]))
    assert launcher.key((narrow, 1.0, 1), 0) != launcher.key((wide, 1.0, 1), 0)
    assert launcher.key((narrow, 1.0, 1), 0) == launcher.key((_descriptor(dtype, (16, 128 // dtype.itemsize), 48, 64), 1.0, 1), 0)


def test_a_cooperative_launcher_says_so_and_asks_triton_for_a_cooperative_grid():
    cooperative = Launcher(_scale_kernel, num_warps=4, cooperative=True, BLOCK=32, TWICE=False)
    plain = Launcher(_scale_kernel, num_warps=4, BLOCK=32, TWICE=False)
    assert cooperative.cooperative is True and plain.cooperative is False
    assert cooperative._options["launch_cooperative_grid"] is True and "launch_cooperative_grid" not in plain._options


def test_a_misaligned_pointer_has_no_key():
    launcher = Launcher(_scale_kernel, num_warps=4, BLOCK=32, TWICE=False)
    x = torch.zeros(64, dtype=torch.float16)
    assert launcher.key((x, x, 5, 1.0, 1), 0) is not None
    assert launcher.key((x[1:], x, 5, 1.0, 1), 0) is None  # 2 bytes off
    assert launcher.key((x[8:], x, 5, 1.0, 1), 0) is not None  # 16 bytes off


def test_one_true_and_one_point_zero_have_different_keys():
    launcher = Launcher(_scale_kernel, num_warps=4, BLOCK=32, TWICE=False)
    x = torch.zeros(64)
    keys = {launcher.key((x, x, 5, 1.0, value), 0) for value in (1, True, 1.0)}
    assert len(keys) == 3


def test_launcher_checks_its_constexprs_and_arguments():
    with pytest.raises(TypeError, match="constexprs must be exactly"):
        Launcher(_scale_kernel, num_warps=4, BLOCK=32)
    with pytest.raises(TypeError, match="constexprs must be exactly"):
        Launcher(_scale_kernel, num_warps=4, BLOCK=32, TWICE=False, n=3)
    launcher = Launcher(_scale_kernel, num_warps=4, BLOCK=32, TWICE=False)
    with pytest.raises(TypeError, match="expected 5 runtime arguments"):
        launcher((1,), torch.zeros(4), torch.zeros(4), 4)


def test_host_helpers_match_triton():
    for x in [1, 2, 3, 5, 64, 65, 1000, 4096]:
        assert next_power_of_2(x) == triton.next_power_of_2(x)


@pytest.mark.parametrize("twice", [False, True])
def test_launches_compute_the_same_through_either_path(twice):
    """Repeated launches with changing alignment, stride (1 is a constexpr to triton), size and dtype."""
    launcher = Launcher(_scale_kernel, num_warps=4, BLOCK=32, TWICE=twice)
    base = torch.randn(300, generator=torch.Generator().manual_seed(0)).to(DEVICE)
    cases = [(torch.float32, 0, 1, 100), (torch.float32, 0, 1, 100), (torch.float32, 1, 1, 100), (torch.float32, 0, 2, 100),
             (torch.float16, 0, 1, 100), (torch.float32, 0, 1, 1), (torch.float32, 0, 1, 16), (torch.float32, 0, 1, 100)]
    for dtype, offset, stride, n in cases:
        x = base.to(dtype)[offset:]
        out = torch.full((n,), float("nan"), dtype=dtype, device=DEVICE)
        launcher((triton.cdiv(n, 32),), x, out, n, 1.5, stride)
        want = x[: n * stride : stride].float() * 1.5 * (2 if twice else 1)
        torch.testing.assert_close(out.float(), want, rtol=1e-3, atol=1e-3)
    if GPU and launch.DIRECT_PATH:  # distinct specialisations launched directly: aligned fp32 stride 1 (n=100, 1, 16), stride 2, fp16
        assert launcher.cached == 5


@pytest.mark.skipif(not (GPU and launch.DIRECT_PATH),
                    reason="the direct path launches compiled kernels (the interpreter always takes triton's path) of a checked triton release")
@pytest.mark.parametrize("name", ["unquantized", "fp8-block", "fp8-channel"])
def test_layer_stays_right_across_specializations(name):
    """Each kernel object called in turn with inputs that triton specialises differently but that
    share every cached plan and launcher: dtypes of ids and router weights, an unaligned and a
    strided hidden_states, one token (with top_k 1: num_valid == 1); each result against the reference."""
    sch = quant.scheme(name)
    results = {}
    for dtype, top_k in ((torch.bfloat16, 2), (torch.float16, 1)):  # top_k 1 and 1 token: num_valid == row_div == 1
        cfg = MoEConfig(num_experts=8, top_k=top_k, hidden_size=256, intermediate_size=128, dtype=dtype)
        raw = random_layer(cfg, sch, device=DEVICE, seed=3)
        kernel, oracle = TritonKernel(cfg, sch.weight_key, sch.activation_key), ReferenceKernel(cfg, sch.weight_key, sch.activation_key)
        weights, oracle_weights = kernel.prepare_weights(raw), oracle.prepare_weights(raw)
        for round_ in range(2):
            for tokens in (1, 64):
                x, routing = random_inputs(cfg, tokens, device=DEVICE, seed=tokens + round_)
                wide = torch.randn(tokens, 2 * cfg.hidden_size + 8, device=DEVICE).to(dtype)
                variants = {
                    "plain": (x, routing),
                    "int32 ids, bf16 weights": (x, Routing(routing.topk_ids.int(), routing.topk_weights.to(torch.bfloat16))),
                    "unaligned x": (wide[:, 1 : 1 + cfg.hidden_size], routing),
                    "strided x": (wide[:, : 2 * cfg.hidden_size : 2], routing),
                }
                for label, (xv, rv) in variants.items():
                    got = kernel.apply(xv, weights, rv)
                    want = oracle.apply(xv.contiguous(), oracle_weights, rv)
                    results[(dtype, round_, tokens, label)] = relative_error(got, want)
                    assert relative_error(got, want) <= tolerance(sch.activation_key, dtype), (dtype, tokens, label)
    assert len(results) == 2 * 2 * 2 * 4
