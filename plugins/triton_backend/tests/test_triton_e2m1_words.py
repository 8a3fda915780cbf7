"""e2m1 codes stored as words (e2m1_words): the layout, the decode by integer operations (CPU: the Triton interpreter)
and by PTX (GPU), the folded scales, and the GEMM at the ends of the scale range it is exact for (GPU: bfloat16)."""

import itertools

import pytest
import torch
import triton
import triton.language as tl

from moe_core import quant
from moe_core.config import MoEConfig
from moe_core.numerics import relative_error, tolerance
from moe_core.presets import random_layer
from moe_core.quantization import fp4
from moe_core.reference.kernel import ReferenceKernel
from moe_core.routing import Routing
from moe_core_triton.e2m1_words import (CODE_BITS_AT, DECODE, PAIR_MASK, PRODUCT_FOLD, SCALE_FOLD, folded_e8m0_scales,
                                        source_bits, to_words)
from moe_core_triton.kernel import TritonKernel
from word_tiles import decoded_by_the_gemm, every_code_everywhere, in_stored_order, thread_registers, tile_rows

GPU = torch.cuda.is_available()
DEVICE = "cuda" if GPU else "cpu"
#: Every e2m1 value by its 3 magnitude bits (the sign is bit 3).
E2M1_MAGNITUDES = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=torch.float64)


def patterns(codes: torch.Tensor) -> torch.Tensor:
    """The bfloat16 bits (int32) each e2m1 code is meant to decode to: its bits at bfloat16 bits 6, 7, 8 and 15."""
    codes = codes.int()
    return sum(((codes >> i) & 1) << at for i, at in enumerate(CODE_BITS_AT))


def decoded(words: torch.Tensor) -> torch.Tensor:
    """int32 words [..., n] read as DECODE says (in Python): the bfloat16 patterns of their bytes' codes, [..., 8 n]."""
    words = words.long() & 0xFFFFFFFF
    pairs = []
    for terms in DECODE:
        pair = sum((((words >> r) | (words << (32 - r))) & 0xFFFFFFFF) & m for r, m in terms)
        pairs += [pair & 0xFFFF, pair >> 16]
    return torch.stack(pairs, dim=-1).flatten(-2).int()


def test_every_code_bit_has_one_place_in_a_word():
    assert sorted(source_bits()) == sorted(itertools.product(range(8), range(4)))


def test_four_rotations_of_the_pattern_cannot_tile_a_word():
    """Why byte 3 takes two rotations: no four rotations of the 8 bits of a pair place 32 distinct bits."""
    pattern = [bit for bit in range(32) if PAIR_MASK >> bit & 1]
    for rotations in itertools.combinations(range(32), 4):
        assert len({(bit + r) % 32 for r in rotations for bit in pattern}) < 32


def test_a_pattern_is_the_code_times_2_pow_minus_126():
    codes = torch.arange(16)
    values = patterns(codes).to(torch.int16).view(torch.bfloat16).double() * 2.0**126
    want = torch.where(codes >= 8, -1.0, 1.0).double() * E2M1_MAGNITUDES[codes & 7]
    assert torch.equal(values, want) and torch.equal(torch.signbit(values), codes >= 8)  # -0.0 for code 8


@pytest.mark.parametrize("gate_up", [True, False], ids=["w13", "w2"])
def test_a_word_holds_rows_8_apart_in_a_tile_at_bytes_j_and_j_plus_1(gate_up):
    """The words to_words stores, gathered as a thread's registers list them (rows r and r + 8 of each 16 of a tile,
    bytes j and j + 1) and read as DECODE says: each byte's codes, in place."""
    codes = every_code_everywhere(2, 32, 64)
    words = to_words(fp4.pack_nibbles(codes), gate_up)[:, tile_rows(32, gate_up)]  # [E, tile rows, bytes]
    values = decoded(thread_registers(words).contiguous().view(torch.int32))  # [E, block, r, j // 2, 8]
    values = in_stored_order(values.reshape(*values.shape[:-1], 4, 2))
    assert torch.equal(values, patterns(codes[:, tile_rows(32, gate_up)]))


def test_words_need_tiles_of_whole_word_rows():
    with pytest.raises(ValueError, match="multiple of 16"):
        to_words(torch.zeros(1, 24, 8, dtype=torch.uint8), gate_up=False)
    with pytest.raises(ValueError, match="even"):
        to_words(torch.zeros(1, 16, 5, dtype=torch.uint8), gate_up=True)


@pytest.mark.parametrize("gate_up", [True, False], ids=["w13", "w2"])
def test_the_gemms_integer_decode_of_a_tile_gives_each_codes_pattern(gate_up):
    """gemm's decode of a tile of words by integer operations (e2m1_words.word_bits: the interpreter, and tiles whose
    weights are not the MMA's register operand), whatever the layout: every code in every position, bit for bit."""
    codes = every_code_everywhere(1, 32, 256)
    tile = to_words(fp4.pack_nibbles(codes), gate_up)[0, tile_rows(32, gate_up)].contiguous()
    assert torch.equal(decoded_by_the_gemm(tile, int4=False, ptx=False), patterns(codes[0, tile_rows(32, gate_up)]))


@pytest.mark.skipif(not GPU, reason="PTX runs compiled for an NVIDIA GPU")
def test_the_ptx_decodes_a_word_handed_to_it_in_one_piece():
    """WORD_BF16_PTX on words whose 4 bytes a thread holds in order (a plain tile of consecutive words): each byte's
    codes as DECODE gives them, for random words (the GEMM tests check the bytes the MMA's layout hands it)."""
    words = torch.randint(-2**31, 2**31, (16, 32), generator=torch.Generator().manual_seed(2), dtype=torch.int64).int()
    assert torch.equal(decoded_by_the_gemm(words.view(torch.uint8), int4=False, ptx=True), decoded(words))


@triton.jit
def _folded_scales_kernel(raw_ptr, out_ptr):
    offs = tl.arange(0, 256)
    tl.store(out_ptr + offs, folded_e8m0_scales(tl.load(raw_ptr + offs)).to(tl.int16, bitcast=True))


def test_e8m0_scales_become_bfloat16_times_the_fold_by_their_bits():
    """Every e8m0 code e up to 192 gives 2^(e - 127) x 2^62 exactly; larger ones (scales above 2^65) infinity."""
    out = torch.empty(256, dtype=torch.int16, device=DEVICE)
    _folded_scales_kernel[(1,)](torch.arange(256, dtype=torch.uint8).to(DEVICE), out)
    got = out.cpu().view(torch.bfloat16).double()
    e = torch.arange(256, dtype=torch.float64)
    assert torch.equal(got[:193], 2.0 ** (e[:193] - 127) * SCALE_FOLD)
    assert torch.isinf(got[193:]).all()
    assert SCALE_FOLD * 2.0**-126 * PRODUCT_FOLD == 1.0


@pytest.mark.skipif(not GPU, reason="bfloat16 GEMMs run compiled on a GPU (the interpreter flushes bfloat16 subnormals)")
@pytest.mark.parametrize("low", [True, False], ids=["2^-68", "2^65"])
def test_mxfp4_words_match_the_reference_at_the_ends_of_their_scale_range(low):
    """mxfp4 under bfloat16 (words) with every scale at the smallest (e8m0 59) or largest (192) the words are exact
    for: the weights x 2^-64 stay normal or subnormal bfloat16 in the MMA, the product x 2^64 comes back."""
    cfg = MoEConfig(8, 2, 256, 128, dtype=torch.bfloat16)
    sch = quant.scheme("mxfp4")
    weights = random_layer(cfg, sch, device=DEVICE, seed=3)
    e = 59 if low else 192
    for name in ("w13_scale", "w2_scale"):
        getattr(weights, name).view(torch.uint8).fill_(e)
    kernel, oracle = TritonKernel(cfg, sch.weight_key, None), ReferenceKernel(cfg, sch.weight_key, None)
    if not kernel.e2m1_words:
        pytest.skip("e2m1 words are stored for sm_90 GPUs only")
    g = torch.Generator().manual_seed(4)
    x = (torch.randn(5, cfg.hidden_size, generator=g) * 2.0 ** (60 if low else -100)).to(DEVICE, cfg.dtype)  # outputs near 1
    routing = Routing.from_logits(torch.randn(5, cfg.num_experts, generator=g).to(DEVICE), cfg.top_k)
    got = kernel.apply(x, kernel.prepare_weights(weights), routing)
    want = oracle.apply(x, oracle.prepare_weights(weights), routing)
    assert torch.isfinite(want).all() and relative_error(got, want) <= tolerance(None, cfg.dtype)
