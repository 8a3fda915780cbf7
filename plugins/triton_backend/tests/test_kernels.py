"""The Triton kernels against the reference backend on random problems.

On a CPU machine they run under TRITON_INTERPRET=1 on tiny shapes (float16; bfloat16 is garbage in
the interpreter); on a GPU the same tests run compiled, bfloat16 included.
"""


import pytest
import torch

from moe_core import quant
from moe_core.numerics import relative_error as rel_err
from moe_core.batched import combine, dispatch
from moe_core.config import Activation, MoEConfig, ParallelConfig
from moe_core.presets import random_layer
from moe_core.reference.kernel import ReferenceKernel
from moe_core.routing import Routing
from moe_core.numerics import tolerance
from moe_core_triton.blocks import batched_table, standard_table
from moe_core_triton.kernel import TritonBatchedKernel, TritonKernel
from moe_core_triton.plugin import BATCHED_SCHEMES, STANDARD_SCHEMES

GPU = torch.cuda.is_available()
DEVICE = "cuda" if GPU else "cpu"
DTYPES = [torch.float16, torch.bfloat16] if GPU else [torch.float16]




def problem(cfg, sch, tokens, seed, ids=None):
    weights = random_layer(cfg, sch, device=DEVICE, seed=seed)
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(tokens, cfg.hidden_size, generator=g).to(DEVICE, cfg.dtype)
    routing = Routing.from_logits(torch.randn(tokens, cfg.num_experts, generator=g).to(DEVICE), cfg.top_k)
    if ids is not None:
        routing = Routing(ids.to(DEVICE), routing.topk_weights)
    return weights, x, routing


def run_both(kernel_cls, cfg, sch, x, weights, routing, **kw):
    kernel = kernel_cls(cfg, sch.weight_key, sch.activation_key)
    oracle = ReferenceKernel(cfg, sch.weight_key, sch.activation_key)
    return kernel.apply(x, kernel.prepare_weights(weights), routing, **kw), oracle.apply(x, oracle.prepare_weights(weights), routing, **kw)


def cfg_for(dtype, **kw):
    base = dict(num_experts=4, top_k=2, hidden_size=128, intermediate_size=64, dtype=dtype)
    base.update(kw)
    return MoEConfig(**base)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", STANDARD_SCHEMES)
@pytest.mark.parametrize("tokens", [1, 5])
def test_standard_matches_reference(name, dtype, tokens):
    sch = quant.scheme(name)
    cfg = cfg_for(dtype)
    weights, x, routing = problem(cfg, sch, tokens, seed=tokens)
    got, want = run_both(TritonKernel, cfg, sch, x, weights, routing)
    assert got.dtype == dtype and torch.isfinite(got).all()
    assert rel_err(got, want) < tolerance(sch.activation_key, dtype)


@pytest.mark.parametrize("name", ["unquantized", "fp8-block", "int8"])
@pytest.mark.parametrize("case", ["one_expert", "gelu_clamp", "odd_sizes", "expert_map", "top1_on_input", "top8", "atomic_reduce"])
def test_standard_edge_cases(name, case):
    sch = quant.scheme(name)
    dtype = torch.float16
    kw, call = {}, {}
    if case == "gelu_clamp":
        kw = dict(activation=Activation.GELU, swiglu_limit=0.3)
    elif case == "odd_sizes":
        kw = dict(hidden_size=72, intermediate_size=40, num_experts=3)
    elif case == "expert_map":
        kw = dict(num_experts=8, parallel=ParallelConfig(ep_size=2))
    elif case == "top1_on_input":
        kw = dict(top_k=1)
        call = dict(apply_router_weight_on_input=True)
    elif case == "top8":
        kw = dict(num_experts=10, top_k=8)
    cfg = cfg_for(dtype, **kw)
    ids = torch.full((6, 2), 2).long() if case == "one_expert" else None
    weights, x, routing = problem(cfg, sch, 6, seed=11, ids=ids)
    if case == "expert_map":
        call = dict(expert_map=torch.tensor([-1, 0, -1, 1, 2, -1, 3, -1], device=DEVICE))
    kernel_cls = TritonKernel
    if case == "atomic_reduce":
        kernel_cls = type("AtomicTritonKernel", (TritonKernel,), {"reduce": "atomic"})
    got, want = run_both(kernel_cls, cfg, sch, x, weights, routing, **call)
    assert torch.isfinite(got).all()
    assert rel_err(got, want) < tolerance(sch.activation_key, dtype)


def test_forwards_of_few_pairs_launch_only_their_gemms(monkeypatch):
    """Up to pair_table_max_pairs pairs the GEMMs group the pairs and sum the top-k rows themselves: no table launch,
    no top-k sum launch. Above it (or with the limit at 0) both come back."""
    from moe_core_triton.compile_check import launches_of

    def kernels(tokens):
        return [launch.name for launch in launches_of("unquantized", tokens, False, torch.float16, (64, 32))]

    limit = TritonKernel.pair_table_max_pairs
    assert kernels(limit // 2) == ["moe_gemm_kernel"] * 2  # top-2: limit // 2 tokens are exactly the limit's pairs
    assert kernels(limit // 2 + 1) == ["_table_kernel", "moe_gemm_kernel", "moe_gemm_kernel", "_topk_sum_kernel"]
    monkeypatch.setattr(TritonKernel, "pair_table_max_pairs", 0)
    assert kernels(1) == ["_table_kernel", "moe_gemm_kernel", "moe_gemm_kernel", "_topk_sum_kernel"]


@pytest.mark.parametrize("name", ["unquantized", "fp8-block", "w4a16"])
@pytest.mark.parametrize("with_map", [False, True])
def test_pair_tables_give_the_block_tables_result_and_leave_their_counters_at_zero(name, with_map):
    """Each row is computed alone and the top-k rows are summed in slot order either way: the same bits. GEMM2's
    arrival counters are back at zero after every forward, so the next forward on the stream starts clean."""
    from moe_core_triton import blocks

    sch = quant.scheme(name)
    cfg = cfg_for(torch.float16, num_experts=8, top_k=3, parallel=ParallelConfig(ep_size=2) if with_map else ParallelConfig())
    weights, x, routing = problem(cfg, sch, 7, seed=4)
    expert_map = torch.tensor([-1, 0, -1, 1, 2, -1, 3, -1], device=DEVICE) if with_map else None
    outs = []
    for cls in (TritonKernel, type("BlockTables", (TritonKernel,), {"pair_table_max_pairs": 0})):
        kernel = cls(cfg, sch.weight_key, sch.activation_key)
        prepared = kernel.prepare_weights(weights)
        for _ in range(2):
            outs.append(kernel.forward(x, prepared, routing, expert_map=expert_map, apply_router_weight_on_input=False))
    assert all(torch.equal(out, outs[0]) for out in outs[1:])
    assert not any(state.any() for key, state in blocks._states.items() if key[0] == blocks.ARRIVALS)


def test_a_pair_table_forward_is_untouched_by_the_grid_barriers_words():
    """A cooperative table launch leaves its barrier's generation word counting on; the top-k sum's counters are
    other words, so a small forward after a large one on the same stream still sums every column tile."""
    from moe_core_triton import blocks

    sch = quant.scheme("unquantized")
    cfg = cfg_for(torch.float16, hidden_size=256)
    weights, x, routing = problem(cfg, sch, 3, seed=6)
    kernel = TritonKernel(cfg, None, None)
    prepared = kernel.prepare_weights(weights)
    want = kernel.forward(x, prepared, routing, expert_map=None, apply_router_weight_on_input=False)
    blocks.stream_words(x.device, blocks.GRID_BARRIER, 2)[:4] = torch.tensor([0, 5, 5, 5])  # as after 5 grid barriers
    assert torch.equal(kernel.forward(x, prepared, routing, expert_map=None, apply_router_weight_on_input=False), want)


@pytest.mark.parametrize("name", BATCHED_SCHEMES)
def test_batched_matches_reference(name):
    sch = quant.scheme(name)
    dtype = torch.float16
    cfg = cfg_for(dtype, parallel=ParallelConfig(use_batched_activation_format=True))
    weights, x, routing = problem(cfg, sch, 5, seed=3)
    xb, brouting, layout = dispatch(x, routing, cfg.num_experts, max_tokens=6)
    got, want = run_both(TritonBatchedKernel, cfg, sch, xb, weights, brouting)
    counts = brouting.expert_num_tokens.tolist()
    for e, c in enumerate(counts):
        assert got[e, c:].abs().sum() == 0  # rows past each count are zero
    assert rel_err(combine(got, layout, routing), combine(want, layout, routing)) < tolerance(sch.activation_key, dtype)


def test_block_tables():
    ids = torch.tensor([[2, 0], [2, 1], [0, 2]], device=DEVICE)
    t = standard_table(ids, 4, 4, block_m=4)
    assert t.num_valid == 6 and int(t.num_padded) == 12
    rows = t.sorted_ids.tolist()  # within an expert, pairs are in atomic order
    assert sorted(rows[:4]) == [1, 4, 6, 6] and rows[4:8] == [3, 6, 6, 6] and sorted(rows[8:12]) == [0, 2, 5, 6]
    assert t.block_expert.tolist()[:3] == [0, 1, 2]
    remote = standard_table(ids, 4, 2, block_m=2, expert_map=torch.tensor([0, -1, 1, -1], device=DEVICE))
    assert int(remote.num_padded) == 6 and sorted(r for r in remote.sorted_ids.tolist() if r < 6) == [0, 1, 2, 4, 5]
    b = batched_table(torch.tensor([1, 0, 3], device=DEVICE), max_tokens=3, block_m=2)
    assert b.sorted_ids.tolist() == [0, 9, 9, 9, 9, 9, 9, 9, 6, 7, 8, 9] and b.block_expert.tolist() == [0, 0, 1, 1, 2, 2]


def test_table_launch_sizes_one_program_to_its_pairs_and_spreads_larger_tables(monkeypatch):
    """One program up to 1024 pairs, with lanes for the next power of two of them; above, programs of at least 1024
    pairs, at most one per SM (132 simulated: an H100)."""
    from moe_core_triton import blocks

    monkeypatch.setattr(blocks, "max_programs", lambda device: 132)
    gpu = torch.device("cuda")
    assert [blocks.table_grid(p, gpu) for p in (1, 72, 512, 1024)] == [(1, 1), (128, 1), (512, 1), (1024, 1)]
    assert [blocks.table_grid(p, gpu) for p in (1025, 32768, 300000)] == [(1024, 2), (1024, 32), (4096, 74)]
    assert blocks.table_grid(291, gpu, least=16) == (16, 19)  # the tests' several-program tables


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("with_map", [False, True])
@pytest.mark.parametrize("block", [None, 16])
def test_block_table_matches_a_python_model(seed, with_map, block):
    """Every valid pair once, in its expert's padded run, experts in order; with ``block`` 16, a launch of several
    programs on a GPU (grid barriers between its phases; the interpreter runs one program)."""
    from moe_core_triton.blocks import standard_table

    g = torch.Generator().manual_seed(seed)
    experts, block_m = 6, [2, 4, 16][seed % 3]
    ids = torch.randint(0, 8 if with_map else experts, (97, 3), generator=g)
    mapping = [0, -1, 1, 2, -1, 3, 4, 5] if with_map else list(range(experts))
    table = standard_table(ids.to(DEVICE), len(mapping), experts, block_m,
                           torch.tensor(mapping, device=DEVICE) if with_map else None, block=block)
    local = [mapping[i] for i in ids.reshape(-1).tolist()]
    runs = [sorted(p for p, e in enumerate(local) if e == expert) for expert in range(experts)]
    padded = [-(-len(run) // block_m) * block_m for run in runs]
    assert int(table.num_padded) == sum(padded)
    rows, owners = table.sorted_ids.tolist(), table.block_expert.tolist()
    begin = 0
    for expert, (run, size) in enumerate(zip(runs, padded)):
        assert sorted(rows[begin: begin + len(run)]) == run and set(rows[begin + len(run): begin + size]) <= {len(local)}
        assert owners[begin // block_m: (begin + size) // block_m] == [expert] * (size // block_m)
        begin += size
    assert set(rows[begin:]) <= {len(local)}
    assert set(owners[begin // block_m:]) <= {experts - 1}  # blocks past the padded count: a valid expert, never read


@pytest.mark.skipif(not GPU, reason="long-K fp8 accumulation is a property of the GPU's MMA units")
@pytest.mark.parametrize("name", ["fp8-channel", "fp8-block", "int8"])
def test_long_reduction_stays_accurate(name):
    """DeepSeek-V3's K = 7168: fp8 products must be promoted to float32 periodically, not only at the end."""
    sch = quant.scheme(name)
    cfg = cfg_for(torch.bfloat16, num_experts=4, hidden_size=7168, intermediate_size=512)
    weights, x, routing = problem(cfg, sch, 300, seed=5)
    got, want = run_both(TritonKernel, cfg, sch, x, weights, routing)
    assert rel_err(got, want) < tolerance(sch.activation_key, cfg.dtype)


@pytest.mark.skipif(not GPU, reason="CUDA graphs need a GPU")
@pytest.mark.parametrize("tokens", [3, 2000])  # a table of one program and of several (grid barriers)
@pytest.mark.parametrize("name, batched", [("unquantized", False), ("fp8-tensor-dyn", False), ("fp8-block", False),
                                           ("fp8-channel", False), ("int8", False), ("unquantized", True), ("fp8-block", True)])
def test_apply_is_cuda_graph_capturable(tokens, name, batched):
    """cuda_graph_safe is a promise: apply() never synchronises with the host, in either format. The replay gives the
    eager call's bits, also where the eager call quantizes inside the GEMMs (QUANT_IN) and the graph runs the passes."""
    sch = quant.scheme(name)
    cfg = cfg_for(torch.bfloat16, num_experts=8, hidden_size=256, intermediate_size=128,
                  parallel=ParallelConfig(use_batched_activation_format=batched))
    weights, x, routing = problem(cfg, sch, tokens, seed=9)
    cls = TritonBatchedKernel if batched else TritonKernel
    if batched:
        x, routing, _ = dispatch(x, routing, cfg.num_experts, max_tokens=tokens)
    kernel = cls(cfg, sch.weight_key, sch.activation_key)
    prepared = kernel.prepare_weights(weights)
    assert cls.cuda_graph_safe
    eager = kernel.apply(x, prepared, routing)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        kernel.apply(x, prepared, routing)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = kernel.apply(x, prepared, routing)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, eager)


@pytest.mark.parametrize("key", [quant.kFp8DynamicTokenSym, quant.kFp8Dynamic128Sym, quant.kFp8DynamicTensorSym, quant.kInt8DynamicTokenSym], ids=str)
@pytest.mark.parametrize("cols", [128, 200, 768])
def test_activation_quantization_matches_the_core_codes(key, cols):
    from moe_core.quantization.qtensor import quantize
    from moe_core_triton.quantize import quantize_activations

    x = torch.randn(9, cols, generator=torch.Generator().manual_seed(cols)).to(DEVICE, torch.float16)
    q, scale = quantize_activations(x, key)
    ref = quantize(x.float().cpu(), key)
    assert torch.allclose(scale.cpu(), ref.scale, rtol=1e-6)
    differ = (q.float().cpu() != ref.data.float()).float().mean().item()
    assert differ <= 0.002  # only exact rounding ties may land on the neighbouring code


def test_stream_words_are_kept_per_purpose_stream_and_thread_and_bounded(monkeypatch):
    """Zeroed words per (purpose, device, stream, thread), reused by later launches there, replaced by more when more
    are asked for; a grid barrier's words are never a top-k sum's; never more states than the bound."""
    import threading

    from moe_core_triton import blocks

    monkeypatch.setattr(blocks, "_states", {})
    monkeypatch.setattr(blocks, "MAX_STATES", 4)
    stream = [7]
    monkeypatch.setattr(blocks, "_current_stream", lambda device: stream[0])
    device = torch.device("cpu")
    first = blocks.stream_words(device, blocks.GRID_BARRIER, 2)
    assert first.tolist() == [0] * blocks.MIN_STATE_WORDS and blocks.stream_words(device, blocks.GRID_BARRIER, 5) is first
    wider = blocks.stream_words(device, blocks.GRID_BARRIER, blocks.MIN_STATE_WORDS + 1)
    assert wider.numel() == blocks.MIN_STATE_WORDS + 1 and not wider.any()
    assert blocks.stream_words(device, blocks.GRID_BARRIER, 2) is wider
    wider[1] = 3  # a grid barrier's generation counts on
    assert not blocks.stream_words(device, blocks.ARRIVALS, 2).any()
    states = []
    for s in (8, 9):  # two more streams: four keys, at the bound
        stream[0] = s
        states.append(blocks.stream_words(device, blocks.GRID_BARRIER, 2))
    assert len(blocks._states) == 4 and len({id(t) for t in [wider, *states]}) == 3
    other = []
    worker = threading.Thread(target=lambda: other.append(blocks.stream_words(device, blocks.GRID_BARRIER, 2)))
    worker.start()
    worker.join()  # a fifth key (another thread): the bound drops the others first
    assert len(blocks._states) == 1 and other[0] is not states[-1]
