"""GEMM2 reading GEMM1's block table (``TritonKernel.shares_table``, gemm.py ``TABLE_M``) where its BLOCK_M divides
GEMM1's: which forwards do, that they build one table, and that they give the reference's result and the values of a
table of GEMM2's own, with remote experts, experts without tokens and every family of scheme."""

import pytest
import torch

from moe_core.config import MoEConfig, ParallelConfig
from moe_core.numerics import relative_error
from moe_core.presets import random_inputs, random_layer
from moe_core.quant import scheme
from moe_core.routing import Routing
from moe_core.testing import conformance
from moe_core_triton.compile_check import launches_of, layer_sizes, with_launch_fields
from moe_core_triton.configs import LaunchConfig
from moe_core_triton.kernel import TritonBatchedKernel, TritonKernel

GPU = torch.cuda.is_available()
DEVICE = "cuda" if GPU else "cpu"
DTYPE = torch.bfloat16 if GPU else torch.float16  # bfloat16 is garbage in the interpreter
BLOCK_TABLES = type("BlockTables", (TritonKernel,), {"pair_table_max_pairs": 0})


def with_block_m(gemm1: int, gemm2: int, base: type[TritonKernel] = BLOCK_TABLES, **fields) -> type[TritonKernel]:
    """``base`` with GEMM1's tiles ``gemm1`` rows high and GEMM2's ``gemm2`` (``fields`` on both)."""
    both = with_launch_fields(base, **fields) if fields else base
    return with_launch_fields(with_launch_fields(both, 1, BLOCK_M=gemm1), 2, BLOCK_M=gemm2)


def own_tables(kernel_cls: type[TritonKernel]) -> type[TritonKernel]:
    """``kernel_cls`` with a block table of GEMM2's own in every forward."""
    return type(f"{kernel_cls.__name__}[own tables]", (kernel_cls,), {"shares_table": staticmethod(lambda *args: False)})


def gemm_launches(kernel_cls, tokens: int, batched: bool = False):
    """(each GEMM launch's constexprs, the kernel names) of one forward of an 8-expert top-2 layer (not run)."""
    launches = launches_of("unquantized", tokens, batched, DTYPE, (64, 48), kernel_cls=kernel_cls)
    return [dict(launch.options) for launch in launches if launch.name == "moe_gemm_kernel"], [launch.name for launch in launches]


@pytest.mark.parametrize("rows, shares", [((32, 16), True), ((32, 32), True), ((16, 32), False)],
                         ids=["gemm2-splits-gemm1s-blocks", "one-block-m", "gemm2-taller"])
def test_gemm2_reads_gemm1s_table_where_its_block_m_divides_gemm1s(rows, shares):
    gemms, names = gemm_launches(with_block_m(*rows), tokens=24)
    assert [(g["BLOCK_M"], g["TABLE_M"]) for g in gemms] == [(rows[0], rows[0]), (rows[1], rows[0] if shares else rows[1])]
    assert names.count("_table_kernel") == (1 if shares else 2)  # a 32-row GEMM2 block would span two experts of GEMM1's


def test_forwards_without_a_standard_block_table_read_their_own_rows():
    pair_tables, _ = gemm_launches(with_block_m(32, 16, base=TritonKernel), tokens=3)  # few pairs: no block table at all
    assert [g["TABLE_M"] for g in pair_tables] == [32, 16]
    batched, _ = gemm_launches(with_block_m(32, 16, base=TritonBatchedKernel), tokens=5, batched=True)
    assert [g["TABLE_M"] for g in batched] == [32, 16]
    kernel = BLOCK_TABLES(MoEConfig(4, 2, 64, 48, dtype=DTYPE), None, None)
    with pytest.raises(ValueError, match="BLOCK_M 32 cannot read a block table of 16-row blocks"):
        kernel.gemm_launch(LaunchConfig(32, 64, 64, 8, 4, 3), 2, weighted=True, batched=False, table_m=16)
    with pytest.raises(ValueError, match="BLOCK_M 16 cannot read a PairTable of 32-row blocks"):
        kernel.gemm_launch(LaunchConfig(16, 64, 64, 1, 4, 3), 2, weighted=True, batched=False, pairs=6, table_m=32)


SCHEMES = ["unquantized", "fp8-block", "fp8-channel", "fp8-tensor-dyn", "int8", "w4a16-zp", "mxfp4"]


@pytest.mark.parametrize("name", SCHEMES)
def test_gemm2_on_gemm1s_table_matches_the_reference_and_its_own_table(name):
    hidden, intermediate = layer_sizes(name)  # no multiple of the tiles (fp4 scale groups tile K)
    cfg = MoEConfig(8, 2, hidden, intermediate, dtype=DTYPE, parallel=ParallelConfig(ep_size=2))
    kernel_cls = with_block_m(64, 16, **(dict(BLOCK_N=128, BLOCK_K=128) if name == "fp8-block" else {}))  # fp8-block: QUANT_OUT
    x, routing = random_inputs(cfg, 37, device=DEVICE, seed=4)
    ids = torch.where(routing.topk_ids == 5, 6, routing.topk_ids)  # local expert 1 (global 5) gets no token
    expert_map = torch.tensor([-1, -1, -1, -1, 0, 1, 2, 3], dtype=torch.int32, device=DEVICE)  # half the pairs remote
    routing = Routing(ids, routing.topk_weights)
    sch = scheme(name)
    raw = random_layer(cfg, sch, device=DEVICE)
    outs = []
    for cls in (kernel_cls, own_tables(kernel_cls)):
        kernel = cls(cfg, sch.weight_key, sch.activation_key)
        outs.append(kernel.apply(x, kernel.prepare_weights(raw), routing, expert_map=expert_map))
        [(g1, g2)] = kernel._plans.values()
        assert (g1.table_m, g2.table_m) == (64, 64 if cls is kernel_cls else 16)
    assert relative_error(outs[0], outs[1]) <= 1e-3  # the same products; only the blocks' padding differs
    conformance.check_against_reference(kernel_cls, cfg, name, x, routing, expert_map)
