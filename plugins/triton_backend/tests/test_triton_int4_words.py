"""int4 codes stored as words (int4_words): the layout, the decode by integer operations (CPU: the Triton interpreter)
and by PTX (GPU), and which layers store them and which GEMM1 tiles run over them."""

import pytest
import torch

from moe_core import quant
from moe_core.config import MoEConfig
from moe_core.presets import random_layer
from moe_core.quantization import fp4
from moe_core_triton import kernel as kernel_module
from moe_core_triton.configs import LaunchConfig
from moe_core_triton.int4_words import BIAS, BIAS_BITS, to_words
from moe_core_triton.k_order import permute_k
from moe_core_triton.kernel import TritonKernel
from word_tiles import decoded_by_the_gemm, every_code_everywhere, in_stored_order, thread_registers

GPU = torch.cuda.is_available()


def decoded(registers: torch.Tensor) -> torch.Tensor:
    """Each word's bytes [..., 4] (uint8) read as WORD_BF16_PTX does (in Python): registers $4 and $5 hold bytes 0, 0,
    1, 1 and 2, 2, 3, 3; byte 2a + c's pair is register a shifted right by 4c, masked with 0x000F000F, ORed with the
    bias. The bfloat16 bits (int32), [..., 4, 2]: each byte's low and high code."""
    b = registers.long()
    twice = [b[..., 2 * a] * 0x0101 | b[..., 2 * a + 1] * 0x01010000 for a in (0, 1)]
    pairs = [((twice[i // 2] >> (4 * (i % 2))) & 0x000F000F) | BIAS_BITS for i in range(4)]
    return torch.stack([torch.stack((p & 0xFFFF, p >> 16), dim=-1) for p in pairs], dim=-2).int()


def test_bias_bits_are_bfloat16_128_in_both_halves_and_a_code_adds_to_it():
    codes = torch.arange(16, dtype=torch.int32)
    values = ((BIAS_BITS & 0xFFFF) | codes).to(torch.int16).view(torch.bfloat16)
    assert BIAS_BITS >> 16 == BIAS_BITS & 0xFFFF and torch.equal(values.double(), BIAS + codes.double())


def test_to_words_only_moves_nibbles_within_a_word_and_is_its_own_inverse():
    codes = fp4.pack_nibbles(every_code_everywhere(2, 32, 128))
    words = to_words(codes)
    assert not torch.equal(words, codes) and torch.equal(to_words(words), codes)
    nibbles = lambda t: torch.sort(torch.stack((t & 15, t >> 4), dim=-1).flatten(-2), dim=-1).values  # noqa: E731
    assert torch.equal(nibbles(thread_registers(words)), nibbles(thread_registers(codes)))


def test_a_threads_registers_decode_to_each_bytes_codes_in_place():
    """The words to_words stores, gathered as a thread's registers list them (rows r and r + 8 of each 16 of a tile,
    bytes j and j + 1: both GEMMs' tiles hold rows as stored) and read as the PTX does: each byte's two codes, in place,
    as bfloat16 128 + code."""
    codes = every_code_everywhere(2, 32, 128)
    values = in_stored_order(decoded(thread_registers(to_words(fp4.pack_nibbles(codes)))))
    assert torch.equal(values, BIAS_BITS & 0xFFFF | codes.int())


def test_words_need_rows_in_blocks_of_16():
    with pytest.raises(ValueError, match="multiple of 16"):
        to_words(torch.zeros(1, 24, 8, dtype=torch.uint8))


def test_the_gemms_integer_decode_of_a_tile_gives_each_code_plus_128():
    """gemm's decode of a tile of words by integer operations (int4_words.word_bits: the interpreter, and tiles whose
    weights are not the MMA's register operand), whatever the layout: every code in every position, bit for bit."""
    codes = every_code_everywhere(1, 32, 256)
    tile = to_words(fp4.pack_nibbles(codes))[0].contiguous()
    assert torch.equal(decoded_by_the_gemm(tile, int4=True, ptx=False), BIAS_BITS & 0xFFFF | codes[0].int())


@pytest.mark.skipif(not GPU, reason="PTX runs compiled for an NVIDIA GPU")
def test_the_ptx_decodes_a_word_handed_to_it_in_one_piece():
    """WORD_BF16_PTX on words whose 4 bytes a thread holds in order (a plain tile of consecutive words): each byte's
    codes as the Python model gives them, for random bytes (the GEMM tests check the bytes the MMA's layout hands it)."""
    raw = torch.randint(0, 256, (16, 128), generator=torch.Generator().manual_seed(2), dtype=torch.uint8)
    assert torch.equal(decoded_by_the_gemm(raw, int4=True, ptx=True), decoded(raw.reshape(16, 32, 4)).reshape(16, 256))


@pytest.mark.parametrize("name", ["w4a16", "w4a16-zp", "w8a16", "mxfp4"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_int4_words_are_stored_for_bfloat16_layers_compiled_for_an_sm_90(name, dtype, monkeypatch):
    """Compiled for an sm_90 (set here as compile_check does: kernel.NVIDIA_PTX, COMPILE_TARGET), bfloat16 layers of
    symmetric int4 codes (w4a16) store them as words, in place in fragment order; their GEMM1 runs no GATE_UP tile,
    while e2m1 words' runs only GATE_UP tiles; float16, zero points (w4a16-zp), other codes, other GPUs and K that is
    not whole chunks of 64 (no fragment order) keep bytes."""
    monkeypatch.setattr(kernel_module, "NVIDIA_PTX", True)
    sch = quant.scheme(name)
    for target, intermediate in ((90, 128), (80, 128), (90, 36)):
        monkeypatch.setattr(kernel_module, "COMPILE_TARGET", target)
        cfg = MoEConfig(4, 2, 128, intermediate, dtype=dtype)
        kernel = TritonKernel(cfg, sch.weight_key, None)
        words = name == "w4a16" and dtype == torch.bfloat16 and target == 90 and intermediate == 128
        assert kernel.int4_words == words
        lc = LaunchConfig(256, 128, 64, 8, 8, 4, SWAP_AB=True, GATE_UP=True)
        here = torch.device("cpu")
        runs = (kernel.as_run(lc, cfg.hidden_size, here, gemm=1), kernel.gemm_launch(lc, 1, False, False).config)
        # a 256-row tile without GATE_UP would need two accumulators of 256 rows: 128 rows then
        assert all((c.GATE_UP, c.BLOCK_M) == ((False, 128) if words else (True, 256)) for c in runs), runs
        assert kernel.as_run(LaunchConfig(128, 128, 64, 8, 8, 4, SWAP_AB=True), cfg.hidden_size, here, gemm=1).GATE_UP == kernel.e2m1_words
        if words:  # the codes fragment order alone stores, each word's nibbles moved
            prepared = kernel.prepare_weights(random_layer(cfg, sch, device="cpu", seed=6))
            canonical = random_layer(cfg, sch, device="cpu", seed=6)
            for field in ("w13", "w2"):
                assert torch.equal(to_words(getattr(prepared, field)), permute_k(getattr(canonical, field).contiguous(), True))
