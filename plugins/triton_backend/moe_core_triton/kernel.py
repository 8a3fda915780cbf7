"""The Triton fused-MoE kernels behind backends ``triton`` (standard format) and ``triton_batched``.

Pipeline per forward: block table (one launch, no host sync) -> activation quantization (Triton,
quantized schemes) -> GEMM1 with the token gather, both gate and up accumulators and the gated
activation fused -> intermediate quantization -> GEMM2 with the router weight fused -> top-k
reduction (standard format). No Python loop over experts. A split-K launch config (gemm.py) adds a
gated-activation pass after GEMM1 and sums GEMM2 with atomics instead of the top-k reduction.
A standard-format forward of at most ``pair_table_max_pairs`` pairs launches neither the table nor the
top-k sum: each GEMM program groups the pairs of its block itself, and GEMM2's last program per column
tile sums the top-k rows (a :class:`~moe_core_triton.blocks.PairTable`; ``PAIR_TABLE`` in gemm.py). Such a
forward, run eagerly, of a small layer and a scheme with dynamic per-token or 1 x BLOCK_K activation groups launches
no quantization pass either: each GEMM quantizes the 16-bit rows it reads (``QUANT_IN`` in gemm.py). An eager
forward on a GPU is replayed from the record of an earlier one with its signature where it can be (replay.py): its
host time is then its allocations and its launches.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass, replace

import torch
from triton.tools.tensor_descriptor import TensorDescriptor

from moe_core.config import Activation, ActivationFormat
from moe_core.errors import KernelInputError
from moe_core.kernel import MoEKernel
from moe_core.quant import BLOCK_128, QuantDtype, QuantKey, ScaleDtype, scheme_for_keys
from moe_core.routing import BatchedRouting, Routing
from moe_core.support import Support
from moe_core.weights import ExpertWeights
from moe_core_triton import configs, e2m1_words, int4_words
from moe_core_triton.blocks import ARRIVALS, BlockTable, PairTable, batched_table, cdiv, next_power_of_2, pair_table, standard_table, stream_words
from moe_core_triton.fused import fused_launcher, fused_layer
from moe_core_triton.gemm import gated_rows_kernel, moe_gemm_kernel
from moe_core_triton.k_order import K_CHUNK, permute_k, whole_chunks
from moe_core_triton.launch import Launcher, hooks_idle, recording
from moe_core_triton.quantize import ROUND_IN_FP32, TORCH_DTYPE, quantize_activations
from moe_core_triton.reduce import cast_into, topk_sum, zero_
from moe_core_triton.replay import Replay
from moe_core_triton.scratch import POOL, fresh_allocations, new_empty

#: Rows (token-expert pairs) the int32 block table can index.
MAX_ROWS = 2**31 - 1
#: check_shapes' answer for every input it accepts (Support is immutable; made once, not per call).
_FITS = Support.yes()
#: Standard-format forwards on a GPU reuse their internal buffers (:mod:`moe_core_triton.scratch`) while
#: rows x (hidden + intermediate), the elements of their intermediate and per-row output, is at most this
#: (8 MB in 16 bits: Qwen3-30B-A3B to 186 tokens, Mixtral-8x7B to 113); larger forwards are GPU-bound.
REUSE_MAX_ELEMENTS = 4 << 20
#: Columns per program of the gated-activation pass after a split-K GEMM1.
GATED_BLOCK_N = 1024
#: The largest BLOCK_M whose weight-only GEMMs scale the tile product rather than the weights (decode tiles).
SCALE_AFTER_DOT_MAX_BLOCK_M = 32
#: The smallest scale group a decode tile's K step of several groups runs as one step a group for (``GROUP_STEPS``,
#: :meth:`TritonKernel.k_steps`): 64 elements along K keep whole fragment-order chunks and rows of codes of 32 bytes or
#: more per copy.
UNROLLED_GROUP_MIN = 64
#: Standard-format forwards of at most this many (token, expert) pairs use a PairTable (no table launch, the top-k
#: sum inside GEMM2): each GEMM program then spends O(pairs) work grouping them, worth it where launches dominate.
PAIR_TABLE_MAX_PAIRS = 64
#: Eager PairTable forwards whose touched weights, pairs x 3 x H x I elements, are at most this quantize their activations
#: inside the GEMMs (``QUANT_IN``): each column tile then repeats the quantization of its rows, which costs more GPU
#: time than the passes it replaces (H100: Qwen3-30B-A3B fp8 at 1 token, 23 -> 28 us in a CUDA graph) but saves their
#: launches' host time (116 -> 79 us eager), a gain only while the layer's GPU work is short. Measured on the H100
#: (docs/benchmarks/triton-h100.md): a gain at Qwen3 1-4 tokens (38M-151M elements), a loss at 8 tokens (302M) and at
#: one Mixtral-8x7B token (352M). CUDA-graph captures always launch the passes (the graph replays no host work).
QUANT_IN_MAX_ELEMENTS = 160 << 20
#: Signatures of eager forwards (replay.py) a kernel keeps, each with its replay or what stands in for one, before it
#: starts over.
MAX_REPLAYS = 256
#: A signature a kernel has not seen: :meth:`TritonKernel.forward` records the launches of the second forward of a
#: signature, not the first, so a forward seen once (a prefill of a new length) does not pay for a record.
_UNSEEN = object()
#: Elements of the [tokens, top-k, BLOCK_N] rows GEMM2's in-kernel top-k sum loads at once (SUM_T tokens).
SUM_TILE_ELEMENTS = 4096
#: Whether the GEMM is compiled for NVIDIA GPUs, where it may use inline PTX, and not run by the interpreter
#: (``TRITON_INTERPRET=1``: the CPU tests) or built for ROCm. The GEMMs then make the values of int4 codes, e4m3 codes and
#: e2m1 codes made exact 16-bit values (``W_CODES`` 3, :meth:`WeightOnly.codes_for`) by PTX (``W_PTX``, :mod:`moe_core_triton.dequantize`).
#: Symmetric int4 codes in K order measured slower by PTX on decode tiles (docs/benchmarks/weight-only-h100.md); stored in
#: fragment order (:mod:`moe_core_triton.k_order`, every real model's K) a thread gets 4 whole bytes per PTX call and
#: measured faster. Layers whose K is not whole chunks keep K order and take the PTX too (not timed: no preset has one).
NVIDIA_PTX = hasattr(moe_gemm_kernel, "device_caches") and torch.version.hip is None
#: The weight blocks (GROUP_N x GROUP_K) and activation groups (1 x GROUP_K) of the block-scaled scheme
#: this plugin declares (fp8-block: ``moe_core.quant.BLOCK_128``).
BLOCK_SCALE_GROUP = BLOCK_128.cols  # square: BLOCK_128.rows too


@dataclass(frozen=True)
class GemmLaunch:
    """One expert GEMM of a forward: its launch config, its launcher (constexprs bound), for GEMM1 whether it
    writes the intermediate quantized (``QUANT_OUT``: no separate quantization pass follows), whether it reads
    16-bit activations and quantizes them itself (``QUANT_IN``: no pass before it), whether it reads a
    :class:`PairTable` (``PAIR_TABLE``), for GEMM2 whether it sums the top-k rows itself (``SUM_PAIRS``), and the
    BLOCK_M of the block table it reads (``TABLE_M``: its own, or GEMM1's where :meth:`TritonKernel.shares_table`)."""

    config: configs.LaunchConfig
    launch: Launcher
    table_m: int
    quantizes_output: bool = False
    quantizes_input: bool = False
    pair_table: bool = False
    sums_pairs: bool = False

    @property
    def columns(self) -> int:
        """Output columns per tile: BLOCK_N, or half of it where one tile holds gate and up rows (``GATE_UP``)."""
        return self.config.BLOCK_N // 2 if self.config.GATE_UP else self.config.BLOCK_N


@dataclass(frozen=True)
class ScaleMode:
    """How the GEMM kernel applies scales for one (weight key, activation key) pair."""

    scales: int  # 0 none, 1 after the K loop, 2 per K block
    a_per_row: bool = False
    b_per_col: bool = False
    int8: bool = False


def scale_mode(weight_key: QuantKey | None, activation_key: QuantKey | None) -> ScaleMode:
    if weight_key is None:
        return ScaleMode(0)
    if weight_key.group.rows > 1:  # 2-D weight blocks
        return ScaleMode(2)
    return ScaleMode(
        1,
        a_per_row=not activation_key.group.is_per_tensor,
        b_per_col=not weight_key.group.is_per_tensor,
        int8=weight_key.dtype is QuantDtype.INT8,
    )


@dataclass(frozen=True)
class WeightOnly:
    """How the GEMMs dequantize the codes of a weight-only scheme (the ``W_*`` constexprs of the GEMM, :mod:`moe_core_triton.dequantize`)."""

    packed: bool  # two 4-bit codes per byte along K
    codes: int  # 0 integers, 1 e2m1, 2 e4m3 bits (fp8 weights read as uint8); see codes_for
    zero: int  # 0 none, 1 the implicit 8 of symmetric int4, 2 a uint8 zero-point tensor
    scale: int  # 0 float32, 1 e4m3 bits (nvfp4), 2 e8m0 bits (mxfp4)
    global_scale: bool  # a float32 scale per expert (nvfp4)
    group: int  # elements along K per scale; -1: the whole K (per channel)
    group_n: int = 1  # rows per scale (128 for 128x128 blocks)

    def group_for(self, k: int) -> int:
        return k if self.group == -1 else self.group

    @property
    def eight_bit_ints(self) -> bool:
        """Whether the codes are 8-bit integers (w8a16, w8a16-zp)."""
        return self.codes == 0 and not self.packed

    def scales_in(self, dtype: torch.dtype) -> bool:
        """``SCALE_16``: whether tiles that scale the weights (not the tile product) do it in ``dtype``, the
        activations' 16-bit type. Every code's exact 16-bit values cost a few bit operations (4- and 8-bit integers,
        e4m3, e2m1); the scales must fit the type's range: in bfloat16 always (float32's range; a float32 scale rounds
        to 8 significant bits, e8m0 and e4m3 scales are exact), in float16 only e4m3 scales (nvfp4), which it holds
        exactly (float16 would flush small float32 scales and overflow large e8m0 ones). A 16-bit multiply does two
        values per instruction and needs no conversion to and from float32: prefill tiles, where the MMA waits on the
        dequantization, get faster (8-bit integers at 4096 tokens 21 to 47% with their codes in fragment order,
        docs/benchmarks/weight-only-h100.md)."""
        return dtype == torch.bfloat16 or self.scale == 1

    def codes_for(self, dtype: torch.dtype) -> int:
        """``W_CODES`` for activations of ``dtype``: e2m1 codes become exact 16-bit values (3) where their scales are
        applied in ``dtype`` (:meth:`scales_in`); float16 with e8m0 scales (mxfp4) keeps the float32 scaling (1). Layers
        whose e2m1 codes are stored as words take 4 instead (:attr:`TritonKernel.e2m1_words`)."""
        if self.codes == 1 and self.scales_in(dtype):
            return 3
        return self.codes

    def uses_ptx(self, dtype: torch.dtype) -> bool:
        """Whether the values are made by inline PTX where the GEMM is compiled for an NVIDIA GPU (see :data:`NVIDIA_PTX`):
        int4 codes, e4m3 codes, and e2m1 codes made exact 16-bit values (stored as words too)."""
        return (self.packed and self.codes == 0) or self.codes_for(dtype) in (2, 3)

    @property
    def scales_in_dtype(self) -> bool:
        """Whether ``prepare_weights`` stores the scales in the activations' 16-bit dtype: nvfp4's e4m3 scales, which
        both 16-bit types hold exactly (3 mantissa bits, exponents 2^-9 to 2^8). The GEMM then loads them ready to
        multiply instead of decoding their bits in every K step (each thread's values of a tile span a scale group
        every 16 values along K), for one more byte per 16 weights (0.5625 to 0.625 bytes a weight)."""
        return self.scale == 1

    @property
    def stored_scale(self) -> int:
        """``W_SCALE``: the scales as ``prepare_weights`` stores them, 0 a float type (float32, or the activations'
        dtype: :attr:`scales_in_dtype`), 2 e8m0 bits (mxfp4)."""
        return 0 if self.scales_in_dtype else self.scale

    def permutes(self, k: int) -> bool:
        """Whether codes of reduction size ``k`` are stored in fragment order (:mod:`moe_core_triton.k_order`): int4,
        8-bit integer, e4m3 and e2m1 codes, where K is whole chunks and a chunk never splits a scale group
        unevenly (groups of 64 values or a divisor or multiple of 64, or one group along K).

        The order pays where a tile feeds the weights to the MMA as its register operand (SWAP_AB on Hopper): every
        full tile search on permuted codes on the H100 picked such tiles, and at 4096 tokens int4 got 21 to 44% faster
        than on K order, fp8 20 to 30%, 8-bit integers 21 to 47% (with bfloat16 scaling), mxfp4 9 to 10%, at 1 to 64
        tokens -6 to +30% (docs/benchmarks/weight-only-h100.md). Tiles that do not (BLOCK_M 16 decode tiles on
        Ampere-style MMA) load K-ordered codes with ldmatrix, and measured 15 to 55% slower on permuted ones."""
        group = self.group_for(k)
        return whole_chunks(k) and (group >= k or group % K_CHUNK == 0 or K_CHUNK % group == 0)

    def block_k(self, wanted: int, k: int) -> int:
        """BLOCK_K for a GEMM of reduction size ``k``: a tile never straddles two scale groups unevenly, and codes stored
        in fragment order (:meth:`permutes`) are read in whole chunks."""
        least = K_CHUNK if self.permutes(k) else 16
        wanted = max(wanted, least)
        group = self.group_for(k)
        if group >= k or group % wanted == 0 or wanted % group == 0:
            return wanted
        return max(least, group & -group)  # the largest power of two dividing the group (groups are powers of two)


#: The W_* constexprs of schemes that are not weight-only (the GEMM ignores them when W_ONLY is False).
NOT_WEIGHT_ONLY = WeightOnly(packed=False, codes=0, zero=0, scale=0, global_scale=False, group=-1)


def weight_only(weight_key: QuantKey | None, activation_key: QuantKey | None) -> WeightOnly | None:
    """The dequantization of a weight-only scheme (16-bit activations); None for every other scheme."""
    if weight_key is None or activation_key is not None:
        return None
    packed = weight_key.dtype in (QuantDtype.INT4, QuantDtype.FP4_E2M1)
    codes = {QuantDtype.FP4_E2M1: 1, QuantDtype.FP8_E4M3: 2}.get(weight_key.dtype, 0)
    zero = 2 if not weight_key.symmetric else (1 if weight_key.dtype is QuantDtype.INT4 else 0)
    scale = {ScaleDtype.FP8_E4M3: 1, ScaleDtype.E8M0: 2}.get(weight_key.scale_dtype, 0)
    return WeightOnly(packed, codes, zero, scale, weight_key.global_scale, weight_key.group.cols, max(weight_key.group.rows, 1))


def signed_bytes(t: torch.Tensor) -> torch.Tensor:
    """uint8 ``t`` as int8 ``t - 128`` (the top bit flipped). 8-bit codes with zero points are stored so, and their zero
    points too: (code - 128) - (zero - 128) is the same value, and Triton turns int8 into 16-bit floats by bit
    operations, two instructions a value, where uint8 takes one conversion (I2F) each (sm_90 SASS)."""
    return (t ^ 0x80).view(torch.int8)


def weight_descriptor(w: torch.Tensor, lc: configs.LaunchConfig) -> TensorDescriptor:
    """The tensor descriptor ``TMA_B`` loads weight tiles through: contiguous weights [E, rows, K] seen as one
    [E * rows, K] matrix, in [BLOCK_N, BLOCK_K] boxes."""
    experts, rows, k = w.shape
    return TensorDescriptor(w, [experts * rows, k], [k, 1], [lc.BLOCK_N, lc.BLOCK_K])


@functools.lru_cache(maxsize=None)
def has_tma(device: torch.device) -> bool:
    """Whether ``device`` has the tensor memory accelerator (sm_90 and later; the interpreter emulates it)."""
    return device.type != "cuda" or torch.cuda.get_device_capability(device) >= (9, 0)


@functools.cache
def _hopper(index: int) -> bool:
    return torch.cuda.get_device_capability(index) == (9, 0)


#: The compute capability (as a number) compile_check compiles for, which :func:`words_by_ptx` then takes for the
#: current GPU's; None: the current GPU's.
COMPILE_TARGET: int | None = None


def wgmma_gpu() -> bool:
    """Whether the GEMMs run on an sm_90 (Hopper's wgmma): the current GPU, or compile_check's :data:`COMPILE_TARGET`."""
    if COMPILE_TARGET is not None:
        return COMPILE_TARGET == 90
    return torch.cuda.is_available() and _hopper(torch.cuda.current_device())


def words_by_ptx(lc: configs.LaunchConfig) -> bool:
    """Whether a GEMM tile over words (:mod:`moe_core_triton.words`: e2m1 or int4 codes) may decode them by PTX: the weights
    are Hopper's wgmma register operand (SWAP_AB, whole warpgroup tiles of 64 rows, :func:`wgmma_gpu`), whose
    layout hands a thread a word's 4 bytes together. Other tiles (narrower ones take mma.sync, unswapped ones feed the
    weights from shared memory) may hand it other bytes: measured on the H100, a 32-row swapped tile decoded garbage by
    PTX. Those tiles decode by integer operations, on the tile's logical rows and bytes."""
    return lc.SWAP_AB and lc.BLOCK_N % 64 == 0 and wgmma_gpu()


def _device_name(device: torch.device) -> str:
    if device.type != "cuda":
        return device.type
    return torch.cuda.get_device_name(device)


class TritonKernel(MoEKernel):
    """Fused MoE in Triton for the STANDARD activation format."""

    backend_name = "triton"
    cuda_graph_safe = True  # block tables are built without host synchronisation
    guards_routing = True  # the block tables and the top-k sum drop invalid pairs and count them
    #: Internal switch for benchmarks/guard_cost.py only: False skips counting invalid routing and
    #: sums the top-k rows with torch (unwritten rows of dropped pairs are then summed as garbage).
    count_routing_errors = True
    #: Top-k reduction: "sum" (GEMM2 writes one row per pair, then a sum over top-k; deterministic)
    #: or "atomic" (GEMM2 adds into a float32 output). "sum" measured as fast or faster on the H100.
    reduce = "sum"
    #: Forwards of at most this many pairs use a PairTable (0: always a block table; tests set it).
    pair_table_max_pairs = PAIR_TABLE_MAX_PAIRS
    #: Eager forwards on a GPU are replayed from records of earlier ones (replay.py); False runs every forward in full
    #: (A/B measurements, debugging).
    replays = True
    #: The one-launch layer's config (fused.py) for every forward that can take it, in place of the tuned data file's
    #: (tests, the tuner); False: never the one-launch layer (the tuner's two-GEMM baseline); None: the data file decides.
    fused_override: configs.FusedConfig | bool | None = None
    #: True: the same inputs give the same bits on every run. Forwards then add nothing with float atomics, whose order
    #: varies: no one-launch layer (whatever ``fused_override`` says), no split-K tiles (a data file's SPLIT_K runs as 1)
    #: and the "sum" reduction (whatever ``reduce`` says). It costs what those paths gain where a data file picks them
    #: (H100: the one-launch layer is 6 to 15% faster for Qwen3-30B-A3B bf16 at 1 and 2 tokens,
    #: docs/benchmarks/triton-h100.md). Set it on the class before the first forward (``TritonKernel.deterministic = True``).
    deterministic = False

    def __init__(self, config, weight_key, activation_key):
        super().__init__(config, weight_key, activation_key)
        self.weight_only = weight_only(weight_key, activation_key)
        self.mode = ScaleMode(0) if self.weight_only is not None else scale_mode(weight_key, activation_key)
        sch = scheme_for_keys(weight_key, activation_key)
        self.scheme_name = sch.name if sch is not None else "custom"
        # A per-tensor dynamic scale of the intermediate is an amax over every row, so rows of
        # dropped (remote or invalid) pairs must hold zeros rather than uninitialised memory.
        self._zero_intermediate = activation_key is not None and activation_key.group.is_per_tensor and not activation_key.static
        self._plans: dict[tuple, tuple[GemmLaunch, GemmLaunch]] = {}
        self._fused_plans: dict[tuple, tuple[configs.FusedConfig, Launcher] | None] = {}
        self._replays: dict[tuple, Replay | bool | None] = {}  # by signature, see _remember
        # Layers with this shape and scheme allocate alike: they share scratch sets (moe_core_triton.scratch).
        self._scratch_family = (config.hidden_size, config.intermediate_size, config.top_k, config.dtype, weight_key, activation_key)
        # The gated activation's constexprs, shared by GEMM1's epilogue and the split-K gated pass.
        self._act, self._clamp = 0 if config.activation is Activation.SILU else 1, config.swiglu_limit is not None
        self._gated_rows = Launcher(gated_rows_kernel, num_warps=4, ACT=self._act, CLAMP=self._clamp, BLOCK_N=GATED_BLOCK_N)

    def prepare_weights(self, weights: ExpertWeights) -> ExpertWeights:
        """Validate, put w13 in gate/up order, make every tensor contiguous and scales float32 (weight-only: below).

        Weight-only schemes keep their canonical layout (docs/quantization.md), read by the GEMM
        as it is: codes, zero points, and e8m0 scales as their bytes (uint8), decoded in registers;
        only the per-expert global scale of nvfp4 is flattened to float32 [E], nvfp4's e4m3 scales are
        stored in the activations' dtype (exactly, :attr:`WeightOnly.scales_in_dtype`), the uint8
        codes and zero points of 8-bit integers (w8a16-zp) are stored as int8 less 128
        (:func:`signed_bytes`), and the codes :meth:`WeightOnly.permutes` names (K whole chunks of 64)
        are stored in the K order of the MMA's register fragments (:mod:`moe_core_triton.k_order`), e2m1 codes there
        under bfloat16 as words (:mod:`moe_core_triton.e2m1_words`, nvfp4's scales then times its ``SCALE_FOLD``), int4
        codes there as words too (:mod:`moe_core_triton.int4_words`) where :attr:`int4_words` says.
        Weights this method prepared are refused: their codes would be permuted twice.
        """
        if weights.prepared_by is not None:
            raise KernelInputError("weights", f"were already prepared by {weights.prepared_by!r}: pass the canonical weights")
        weights = super().prepare_weights(weights)
        fix = {}
        packed_scales = self.weight_only is not None and self.weight_only.stored_scale != 0
        dtype_scales = self.weight_only is not None and self.weight_only.scales_in_dtype
        float_bits = self.weight_only is not None and self.weight_only.codes == 2  # fp8 codes read as their bytes
        unsigned_bytes = self.weight_only is not None and self.weight_only.eight_bit_ints and self.weight_only.zero == 2
        for name in ("w13", "w2", "w13_scale", "w2_scale", "a13_scale", "a2_scale", "w13_zero", "w2_zero"):
            t = getattr(weights, name)
            if t is None:
                continue
            if name in ("w13", "w2") and self.weight_only is not None:
                codes = t.contiguous().view(torch.uint8) if float_bits else t.contiguous()
                codes = signed_bytes(codes) if unsigned_bytes else codes
                k = t.shape[-1] * (2 if self.weight_only.packed else 1)
                codes = permute_k(codes, self.weight_only.packed) if self.codes_permuted(k) else codes
                if self.e2m1_words:
                    codes = e2m1_words.to_words(codes, gate_up=name == "w13")
                elif self.int4_words:
                    codes = int4_words.to_words(codes)
                fix[name] = codes
            elif name in ("w13_zero", "w2_zero") and unsigned_bytes:
                fix[name] = signed_bytes(t.contiguous())
            elif name in ("w13", "w2", "w13_zero", "w2_zero"):
                fix[name] = t.contiguous()
            elif packed_scales and name in ("w13_scale", "w2_scale"):
                fix[name] = t.contiguous().view(torch.uint8)
            elif dtype_scales and name in ("w13_scale", "w2_scale"):  # e4m3 values: x 2^62 exact in bfloat16 too
                fix[name] = (t.float() * e2m1_words.SCALE_FOLD if self.e2m1_words else t).to(self.config.dtype).contiguous()
            else:
                fix[name] = t.float().contiguous()
        for name in ("w13_global_scale", "w2_global_scale"):
            t = getattr(weights, name)
            if t is not None:
                fix[name] = t.float().reshape(-1).contiguous()
        return replace(weights, **fix)

    def check_shapes(self, hidden_states: torch.Tensor, routing) -> Support:
        rows = hidden_states.shape[0] * (self.config.top_k if isinstance(routing, Routing) else hidden_states.shape[1])
        if rows > MAX_ROWS:
            return Support.no(f"{rows} rows exceed the int32 block table ({MAX_ROWS})")
        return _FITS

    # ------------------------------------------------------------------ forward
    def forward(self, hidden_states, weights, routing, *, expert_map, apply_router_weight_on_input):
        """The layer's output. An eager standard-format forward on a GPU is replayed from the record of an earlier one
        with its signature where it can be (replay.py); else it runs in full, and the second one of its signature, or one
        that finds the record no longer valid, records its launches."""
        signature = self._replay_signature(hidden_states, routing, expert_map, apply_router_weight_on_input)
        replay = self._replays.get(signature, _UNSEEN) if signature is not None else False
        if replay is _UNSEEN or replay is False:
            if replay is _UNSEEN:
                self._remember(signature, None)  # record the next forward of this signature
            return self._forward(hidden_states, weights, routing, expert_map, apply_router_weight_on_input)
        inputs = (hidden_states, routing.topk_ids, routing.topk_weights, expert_map)
        if replay is not None:
            out = replay(weights, inputs, signature[1])
            if out is not None:
                return out
        with recording() as launches, fresh_allocations() as fresh:
            out = self._forward(hidden_states, weights, routing, expert_map, apply_router_weight_on_input)
        self._remember(signature, self._record(launches, weights, inputs, out, fresh))
        return out

    def _remember(self, signature: tuple, replay: Replay | bool | None) -> None:
        """Keep ``replay`` for ``signature`` (a Replay; False, never replayable; None, record the next forward)."""
        if len(self._replays) >= MAX_REPLAYS:
            self._replays.clear()
        self._replays[signature] = replay

    def _replay_signature(self, x: torch.Tensor, routing, expert_map, apply_router_weight_on_input: bool) -> tuple | None:
        """What the launches of an eager standard-format forward on a GPU depend on besides the pointers of its inputs
        and its weights; None for every other forward."""
        if (not self.replays or apply_router_weight_on_input or not x.is_cuda or not isinstance(routing, Routing)
                or not self.count_routing_errors or not x.shape[0] or torch._C._cuda_isCurrentStreamCapturing()):
            return None
        device = torch._C._cuda_getDevice()
        ids, weights = routing.topk_ids, routing.topk_weights
        aligned = not (x.data_ptr() | ids.data_ptr() | weights.data_ptr() | (0 if expert_map is None else expert_map.data_ptr())) & 15
        return (device, torch._C._cuda_getCurrentRawStream(device), threading.get_ident(), x.get_device(), x.shape[0], x.stride(),
                ids.dtype, ids.stride(), weights.dtype, weights.stride(), None if expert_map is None else expert_map.dtype, aligned,
                self.reduce, self.pair_table_max_pairs, self.fused_override, self.deterministic)

    def _record(self, launches: list, weights: ExpertWeights, inputs: tuple, out: torch.Tensor, fresh: list) -> Replay | bool | None:
        """The replay of a forward that made ``launches`` and allocated ``fresh``: False where none can be made (what
        :meth:`Replay.record` refuses), None where only launch hooks prevented it."""
        replay = Replay.record(launches, weights, inputs, out, kept=(self.routing_errors.buffer(out.device),), fresh=fresh)
        if replay is None:
            return None if not hooks_idle() else False
        return replay

    def _forward(self, hidden_states, weights, routing, expert_map, apply_router_weight_on_input):
        """The layer's output, computed in full."""
        cfg = self.config
        x = hidden_states
        errors = self.routing_errors if self.count_routing_errors else None
        batched = isinstance(routing, BatchedRouting)
        if batched:
            experts, max_tokens, hidden = x.shape
            a_in = x.reshape(experts * max_tokens, hidden)
            rows, row_div, tokens = experts * max_tokens, 1, max_tokens
            table_for = lambda g, errs: batched_table(routing.expert_num_tokens, max_tokens, g.config.BLOCK_M, errs)  # noqa: E731
        else:
            if apply_router_weight_on_input:  # top_k == 1
                x = (x.float() * routing.topk_weights.float()).to(x.dtype)
            a_in = x
            tokens = x.shape[0]
            rows, row_div = tokens * cfg.top_k, cfg.top_k
        device = x.device

        weighted = not (batched or apply_router_weight_on_input)
        fused = self._fused_plan(device, rows, tokens, weighted, expert_map is not None)
        if fused is not None:
            return self._run_fused(fused, x, weights, routing, expert_map, errors)
        capturing = device.type == "cuda" and torch.cuda.is_current_stream_capturing()
        g1, g2 = self._gemm_launches(device, rows, tokens, weighted, batched, expert_map is not None, eager=not capturing)
        empty = self._scratch(device, rows, tokens, capturing) if not batched else new_empty
        if not batched:
            table_for = lambda g, errs: self.rows_of(g, routing.topk_ids, expert_map, errs, empty)  # noqa: E731
        table1 = table_for(g1, errors)  # invalid routing is counted by the first table only
        table2 = table1 if g2.table_m == g1.config.BLOCK_M else table_for(g2, None)

        a2, a2_scale = self._run_gemm1(g1, a_in, weights, table1, rows, row_div, empty, quantize_output=not g2.quantizes_input)
        topk_weights = routing.topk_weights.contiguous() if weighted else None
        return self._run_gemm2(g2, a2, a2_scale, weights, table2, routing, topk_weights, expert_map, empty, x.shape if batched else None)

    def _fused_plan(self, device: torch.device, rows: int, tokens: int, weighted: bool,
                    has_map: bool) -> tuple[configs.FusedConfig, Launcher] | None:
        """The one-launch layer (fused.py) and its launcher for a forward of ``rows`` pairs, made once per (device,
        rows, tokens, weighted, expert map or not); None runs the two GEMMs. It takes unquantized 16-bit layers in the
        standard format whose router weight multiplies GEMM2's output (``weighted``), forwards of a
        :class:`PairTable`, and a :class:`~moe_core_triton.configs.FusedConfig` for ``tokens`` in the tuned data file
        (:func:`~moe_core_triton.configs.choose_fused`) or :attr:`fused_override` (False: never); never for a
        :attr:`deterministic` kernel."""
        key = (device, rows, tokens, weighted, has_map, self.fused_override, self.deterministic)
        if key in self._fused_plans:
            return self._fused_plans[key]
        if len(self._fused_plans) >= 4096:
            self._fused_plans.clear()
        cfg = self.config
        fc = None
        if (self.fused_override is not False and not self.deterministic and self.weight_key is None and self.activation_key is None
                and weighted and cfg.dtype in (torch.bfloat16, torch.float16) and self.pair_table_pairs(rows, False) is not None):
            key_in_file = configs.shape_key(cfg.local_num_experts, cfg.intermediate_size, cfg.hidden_size, self.scheme_name, "fused")
            fc = self.fused_override or configs.choose_fused(_device_name(device), key_in_file, tokens)
        plan = None if fc is None else (fc, fused_launcher(fc, self._act, self._clamp, has_map, rows, cfg.local_num_experts,
                                                           cfg.top_k, cfg.hidden_size))
        self._fused_plans[key] = plan
        return plan

    def _run_fused(self, plan: tuple[configs.FusedConfig, Launcher], x: torch.Tensor, weights: ExpertWeights, routing: Routing,
                   expert_map: torch.Tensor | None, errors) -> torch.Tensor:
        """The layer's output by the one-launch layer (:meth:`_fused_plan`); invalid pairs counted in ``errors``."""
        fc, launcher = plan
        cfg = self.config
        table = pair_table(routing.topk_ids, cfg.num_experts, cfg.local_num_experts, fc.BLOCK_M, expert_map, errors)
        x = x if x.stride(1) == 1 else x.contiguous()
        return fused_layer(launcher, fc, x, weights.w13, weights.w2, routing.topk_weights.contiguous(), table, cfg.swiglu_limit or 0.0)

    def rows_of(self, g: GemmLaunch, topk_ids: torch.Tensor, expert_map: torch.Tensor | None = None, errors=None,
                empty=new_empty) -> BlockTable | PairTable:
        """The standard-format rows GEMM launch ``g`` reads: a :class:`PairTable` where it takes one, else the block
        table, built now (one launch) with ``g.table_m`` rows per block; invalid pairs are counted in ``errors`` (a
        RoutingErrorCounter) if given."""
        cfg, block_m = self.config, g.table_m
        if g.pair_table:
            return pair_table(topk_ids, cfg.num_experts, cfg.local_num_experts, block_m, expert_map, errors)
        return standard_table(topk_ids, cfg.num_experts, cfg.local_num_experts, block_m, expert_map, errors, empty=empty)

    def _run_gemm1(self, g: GemmLaunch, x, weights: ExpertWeights, table: BlockTable | PairTable, rows: int, row_div: int, empty,
                   quantize_output: bool = True):
        """The layer's 16-bit input ``x`` quantized (unless the launch does it, ``QUANT_IN``), GEMM1 with its gated
        activation, then the intermediate's quantization unless ``quantize_output`` is False (GEMM2 quantizes it):
        GEMM2's input [rows, I] and its scales (None for 16-bit activations). A split-K launch sums into a float32
        buffer first, then :func:`gated_rows_kernel` applies the activation; a ``QUANT_OUT`` launch quantizes in
        its epilogue."""
        cfg, i = self.config, self.config.intermediate_size
        device = x.device
        a, a_scale = (x, None) if g.quantizes_input else self._quantize(x, weights.a13_scale, empty)
        w = dict(zero=weights.w13_zero, global_scale=weights.w13_global_scale)
        if g.quantizes_output:
            key = self.activation_key
            q, scale = empty((rows, i), TORCH_DTYPE[key.dtype], device), empty((rows, cdiv(i, key.group.cols)), torch.float32, device)
            self._gemm(g, a, a_scale, weights.w13, weights.w13_scale, q, table, row_div=row_div, up_offset=i, out_scale=scale, **w)
            return q, scale
        if g.config.SPLIT_K == 1:
            inter = torch.zeros((rows, i), dtype=cfg.dtype, device=device) if self._zero_intermediate else empty((rows, i), cfg.dtype, device)
            self._gemm(g, a, a_scale, weights.w13, weights.w13_scale, inter, table, row_div=row_div, up_offset=i, **w)
        else:
            partial = zero_(empty((rows, 2 * i), torch.float32, device))
            self._gemm(g, a, a_scale, weights.w13, weights.w13_scale, partial, table, row_div=row_div, up_offset=i, n=i, **w)
            inter = empty((rows, i), cfg.dtype, device)
            self._gated_rows((rows, cdiv(i, GATED_BLOCK_N)), partial, inter, i, cfg.swiglu_limit or 0.0, partial.stride(0), inter.stride(0))
        return self._quantize(inter, weights.a2_scale, empty) if quantize_output else (inter, None)

    def _run_gemm2(self, g: GemmLaunch, a, a_scale, weights: ExpertWeights, table: BlockTable | PairTable, routing, topk_weights,
                   expert_map, empty, batched_shape: torch.Size | None):
        """GEMM2 with the router weight (``topk_weights``, None if not applied here) and the top-k reduction (``a``:
        the intermediate, 16-bit where the launch quantizes it, ``QUANT_IN``): the layer's output, [tokens, H], or
        ``batched_shape`` for the batched format (rows past the counts are 0)."""
        cfg, h = self.config, self.config.hidden_size
        rows, device = a.shape[0], a.device
        w = dict(topk_weights=topk_weights, zero=weights.w2_zero, global_scale=weights.w2_global_scale)
        if batched_shape is not None:
            out_rows = torch.zeros((rows, h), dtype=cfg.dtype, device=device)
            self._gemm(g, a, a_scale, weights.w2, weights.w2_scale, out_rows, table, row_div=1, **w)
            return out_rows.view(batched_shape)
        tokens = rows // cfg.top_k
        if self._atomic(g.config, batched=False):
            sums = zero_(empty((tokens, h), torch.float32, device))
            self._gemm(g, a, a_scale, weights.w2, weights.w2_scale, sums, table, row_div=1, c_row_div=cfg.top_k, **w)
            return cast_into(sums, torch.empty((tokens, h), dtype=cfg.dtype, device=device))
        out_rows = empty((rows, h), cfg.dtype, device)
        if g.sums_pairs:
            out = torch.empty((tokens, h), dtype=cfg.dtype, device=device)
            counters = stream_words(device, ARRIVALS, cdiv(h, g.config.BLOCK_N))
            self._gemm(g, a, a_scale, weights.w2, weights.w2_scale, out_rows, table, row_div=1, sums=(out, counters), **w)
            return out
        self._gemm(g, a, a_scale, weights.w2, weights.w2_scale, out_rows, table, row_div=1, **w)
        if not self.count_routing_errors:
            return out_rows.view(tokens, cfg.top_k, h).sum(dim=1)
        return topk_sum(out_rows, routing.topk_ids, cfg.num_experts, cfg.local_num_experts, expert_map)

    def _atomic(self, gemm2: configs.LaunchConfig, batched: bool) -> bool:
        """Whether GEMM2 adds into a float32 [tokens, H] output (the "atomic" reduction, or split K) instead of
        writing one row per pair for the top-k sum."""
        return not batched and not self.deterministic and (self.reduce == "atomic" or gemm2.SPLIT_K > 1)

    def _scratch(self, device: torch.device, rows: int, tokens: int, capturing: bool):
        """The ``empty`` of a standard-format forward: the shared scratch set of small forwards outside
        CUDA-graph capture (``capturing``), keyed by (device, stream, thread, rows, tokens, layer shape and scheme);
        else plain allocation."""
        cfg = self.config
        if rows * (cfg.hidden_size + cfg.intermediate_size) > REUSE_MAX_ELEMENTS or device.type != "cuda" or capturing:
            return new_empty
        return POOL.empty_for((device, torch._C._cuda_getCurrentRawStream(device.index), threading.get_ident(), rows, tokens,
                               self._scratch_family))

    def _gemm_launches(self, device: torch.device, rows: int, tokens: int, weighted: bool, batched: bool,
                       has_map: bool = False, eager: bool = True) -> tuple[GemmLaunch, GemmLaunch]:
        """GEMM1 and GEMM2 launch configs and launchers, made once per (device, rows, tokens, weighted,
        batched, expert map or not, eager or captured in a CUDA graph) and then cached."""
        key = (device, rows, tokens, weighted, batched, has_map, eager, self.deterministic)
        found = self._plans.get(key)
        if found is None:
            if len(self._plans) >= 4096:  # token counts are bounded in practice; stay bounded anyway
                self._plans.clear()
            i, h = self.config.intermediate_size, self.config.hidden_size
            pairs = self.pair_table_pairs(rows, batched)
            inside = eager and pairs is not None and pairs * 3 * h * i <= QUANT_IN_MAX_ELEMENTS  # QUANT_IN where it can
            lc1, lc2 = self._config(device, rows, i, h, gemm=1, tokens=tokens), self._config(device, rows, h, i, gemm=2, tokens=tokens)
            g1 = self.gemm_launch(lc1, 1, weighted, batched, pairs, has_map, quantize_input=inside)
            found = self._plans[key] = (g1, self.gemm_launch(lc2, 2, weighted, batched, pairs, has_map,
                                                             quantize_input=inside and not g1.quantizes_output,
                                                             table_m=lc1.BLOCK_M if self.shares_table(lc1, lc2, batched, pairs) else None))
        return found

    @staticmethod
    def shares_table(gemm1: configs.LaunchConfig, gemm2: configs.LaunchConfig, batched: bool, pairs: int | None) -> bool:
        """Whether GEMM2, launched with ``gemm2``, reads the block table GEMM1 reads (launched with ``gemm1``) rather
        than one built for its own BLOCK_M: in standard-format forwards of a block table (``pairs`` None: a
        :class:`PairTable` has no blocks to share), where GEMM2's BLOCK_M divides GEMM1's (gemm.py,
        ``TABLE_M``). A forward then builds one table; GEMM2's blocks are padded as GEMM1's, and those of padding
        only exit at once (on the H100, 12 µs of a 630 µs Qwen3-30B-A3B fp8-block layer at 4096 tokens was the
        second table)."""
        return not batched and pairs is None and gemm1.BLOCK_M % gemm2.BLOCK_M == 0

    def pair_table_pairs(self, rows: int, batched: bool) -> int | None:
        """``rows`` when a forward of that many pairs uses a :class:`PairTable`, else None (a block table)."""
        return None if batched or rows > self.pair_table_max_pairs or not self.count_routing_errors else rows

    def gemm_launch(self, lc: configs.LaunchConfig, gemm: int, weighted: bool, batched: bool, pairs: int | None = None,
                    has_map: bool = False, quantize_input: bool = False, table_m: int | None = None) -> GemmLaunch:
        """GEMM ``gemm`` (1 or 2) of this layer launched with ``lc`` as a forward launches it (for the tuner too);
        ``pairs``: the pair count of a :class:`PairTable` forward (None: the GEMM reads a block table);
        ``quantize_input``: the GEMM quantizes its 16-bit input itself (``QUANT_IN``) where the scheme and ``lc`` allow
        (a forward asks for it in eager PairTable forwards of small layers, :data:`QUANT_IN_MAX_ELEMENTS`);
        ``table_m``: the BLOCK_M of the block table it reads, a multiple of ``lc.BLOCK_M`` (:meth:`shares_table`;
        None: a table of its own)."""
        k = self.config.hidden_size if gemm == 1 else self.config.intermediate_size
        if gemm == 2 and lc.GATE_UP:
            raise ValueError(f"GATE_UP is for GEMM1 (gate and up rows in one tile); GEMM2 has no up rows, got {lc}: fix the entry")
        if gemm == 1:
            lc = self._gemm1_over_words(lc)
        table_m = table_m or lc.BLOCK_M
        if table_m % lc.BLOCK_M or (pairs is not None and table_m != lc.BLOCK_M):
            raise ValueError(f"GEMM{gemm} with BLOCK_M {lc.BLOCK_M} cannot read a "
                             f"{'PairTable' if pairs is not None else 'block table'} of {table_m}-row blocks")
        routes = dict(self._pair_table_constexprs(lc, pairs, has_map, guard=gemm == 1, sums=gemm == 2 and not self._atomic(lc, batched)),
                      TABLE_M=table_m)
        quant_in = self._input_quantization(lc) if quantize_input else 0
        common = dict(quantizes_input=quant_in != 0, pair_table=routes["PAIR_TABLE"], sums_pairs=routes["SUM_PAIRS"], table_m=table_m)
        if gemm == 1:
            quant_out = self._quantizes_intermediate(lc)
            return GemmLaunch(lc, self._gemm_launcher(lc, k, routes, gated=True, weighted=False, atomic=False, quant_out=quant_out,
                                                      quant_in=quant_in), quantizes_output=quant_out, **common)
        return GemmLaunch(lc, self._gemm_launcher(lc, k, routes, gated=False, weighted=weighted, atomic=self._atomic(lc, batched),
                                                  quant_in=quant_in), **common)

    def _pair_table_constexprs(self, lc: configs.LaunchConfig, pairs: int | None, has_map: bool, guard: bool, sums: bool) -> dict:
        """The GEMM's PairTable constexprs (gemm.py): for ``pairs`` pairs, with an expert map or not, counting invalid
        pairs (``guard``, GEMM1) and summing the top-k rows (``sums``, GEMM2 unless it adds into its output); a
        GEMM reading a block table gets one fixed set, so its compiled kernel is shared."""
        if pairs is None:
            return dict(PAIR_TABLE=False, HAS_MAP=False, GUARD=False, P_P2=1, E_P2=1, SUM_PAIRS=False, TOP_K=1, K_P2=1, SUM_T=1)
        top_k = self.config.top_k
        k_p2 = next_power_of_2(top_k)
        sum_t = min(next_power_of_2(cdiv(pairs, top_k)), max(1, SUM_TILE_ELEMENTS // (k_p2 * lc.BLOCK_N)))
        return dict(PAIR_TABLE=True, HAS_MAP=has_map, GUARD=guard, P_P2=next_power_of_2(pairs),
                    E_P2=next_power_of_2(self.config.local_num_experts), SUM_PAIRS=sums, TOP_K=top_k, K_P2=k_p2, SUM_T=sum_t)

    def _quantizes_intermediate(self, lc: configs.LaunchConfig) -> bool:
        """Whether GEMM1 with ``lc`` quantizes the intermediate in its epilogue (``QUANT_OUT``): it is quantized to
        fp8 dynamically in groups of exactly BLOCK_N columns (fp8-block with 128-column tiles), K not split."""
        key = self.activation_key
        return (key is not None and key.dtype is QuantDtype.FP8_E4M3 and not key.static and key.group.rows == 1
                and key.group.cols == lc.BLOCK_N and lc.SPLIT_K == 1)

    def _input_quantization(self, lc: configs.LaunchConfig) -> int:
        """``QUANT_IN`` of a GEMM launched with ``lc`` that may quantize its own input: 1 (per-token scales over the
        whole K) or 2 (1 x BLOCK_K groups), 0 where a separate pass must (or the scheme has 16-bit activations).
        Dynamic fp8 / int8 per-token or per-group scales only: a per-tensor scale needs every row first, a static
        one is cheap anyway."""
        key = self.activation_key
        if key is None or key.static or key.group.rows != 1:
            return 0
        if key.group.cols == -1:
            return 1
        return 2 if key.group.cols == lc.BLOCK_K else 0

    def _gemm_launcher(self, lc: configs.LaunchConfig, k: int, routes: dict, *, gated: bool, weighted: bool, atomic: bool,
                       quant_out: bool = False, quant_in: int = 0) -> Launcher:
        """The GEMM kernel with every constexpr of this layer, scheme and launch config bound (``k``: its reduction size;
        ``routes``: the rows it reads, :meth:`_pair_table_constexprs` and ``TABLE_M``; ``quant_in``:
        :meth:`_input_quantization`)."""
        mode = self.mode
        fp8 = self.activation_key is not None and self.activation_key.dtype is QuantDtype.FP8_E4M3  # the GEMM reads fp8 activations
        wo = self.weight_only or NOT_WEIGHT_ONLY
        group = wo.group_for(k)
        block_k, unroll = self.k_steps(lc, k)
        return Launcher(
            moe_gemm_kernel, num_warps=lc.num_warps, num_stages=lc.num_stages,
            GATED=gated, ACT=self._act, CLAMP=gated and self._clamp, MUL_ROUTED_WEIGHT=weighted, ATOMIC_OUT=atomic,
            SCALES=mode.scales, A_PER_ROW=mode.a_per_row, B_PER_COL=mode.b_per_col, INT8=mode.int8,
            GROUP_N=BLOCK_SCALE_GROUP, GROUP_K=BLOCK_SCALE_GROUP, ONE_B_SCALE=self._one_weight_scale_per_tile(lc, gated),
            PROMOTE_EVERY=lc.BLOCK_K if fp8 else None,
            W_ONLY=self.weight_only is not None, W_PACKED=wo.packed, W_CODES=self._weight_codes, W_ZERO=wo.zero,
            W_SCALE=wo.stored_scale,
            W_GLOBAL=wo.global_scale, W_GROUP=group, W_GROUP_N=wo.group_n, GROUPS_PER_TILE=max(block_k // group, 1),
            SCALE_AFTER_DOT=self._scales_after_dot(lc, block_k, k), SCALE_16=wo.scales_in(self.config.dtype),
            W_PTX=NVIDIA_PTX and wo.uses_ptx(self.config.dtype) and (not self._stores_words or words_by_ptx(lc)),
            W_PERMUTED=self.codes_permuted(k),
            BLOCK_M=lc.BLOCK_M, BLOCK_N=lc.BLOCK_N, BLOCK_K=block_k, GROUP_M=lc.GROUP_M, SWAP_AB=lc.SWAP_AB,
            SPLIT_K=lc.SPLIT_K, UNROLL=unroll, MMA_IN_FLIGHT=lc.MMA_IN_FLIGHT, EVEN_K=k % block_k == 0, TMA_B=lc.TMA_B,
            QUANT_OUT=quant_out, QUANT_IN=quant_in,
            ROUND_FP8=ROUND_IN_FP32,
            GATE_UP=lc.GATE_UP,
            **routes,
        )

    def _scales_after_dot(self, lc: configs.LaunchConfig, block_k: int, k: int) -> bool:
        """Weight-only schemes with one scale group per K step of ``block_k`` (:meth:`k_steps`) and a decode tile
        (BLOCK_M <= 32): the GEMM multiplies each step's [BLOCK_M, BLOCK_N] product by the scales instead of the
        [BLOCK_N, BLOCK_K] dequantized weights (int and fp8 codes are exact in 16 bits), fewer multiplies where
        BLOCK_M < BLOCK_K. Larger tiles keep the scaled weights, so the MMA accumulates across K steps. Never for e2m1
        words, whose unscaled values are the codes times 2^-126 (:mod:`moe_core_triton.e2m1_words`)."""
        wo = self.weight_only
        return (wo is not None and block_k <= wo.group_for(k) and lc.BLOCK_M <= SCALE_AFTER_DOT_MAX_BLOCK_M
                and not self.e2m1_words)

    def k_steps(self, lc: configs.LaunchConfig, k: int) -> tuple[int, int]:
        """(BLOCK_K, UNROLL) of the GEMM launched with ``lc`` for reduction size ``k``: ``lc.BLOCK_K`` and 1, except
        with ``GROUP_STEPS`` (:meth:`_group_steps`): one scale group a step, ``lc.BLOCK_K / group`` steps an iteration
        of the K loop (gemm.py, ``UNROLL``), so that each group's product is scaled (:meth:`_scales_after_dot`) instead
        of every weight, with the same bytes in flight."""
        steps = self._group_steps(lc, k)
        return lc.BLOCK_K // steps, steps

    def _group_steps(self, lc: configs.LaunchConfig, k: int) -> int:
        """How many K steps ``lc``'s K step runs as: the scale groups in it where ``lc.GROUP_STEPS`` asks for it, the K
        step spans several whole groups of at least :data:`UNROLLED_GROUP_MIN` elements, and a step of one group would
        scale its product (:meth:`_scales_after_dot`: a weight-only decode tile, e2m1 words excepted); else 1. A choice
        of the tuned data file: in sm_90 SASS, w4a16's 16x64x256 tile so takes 650 instructions a K step and warp in GEMM1
        instead of 821 (396 instead of 436 in GEMM2), but every group's product waits for its MMA before it is scaled;
        on the H100 the w4a16 layer measured 1.9 to 3.4% faster with it for Qwen3-30B-A3B's GEMM1 at 16 and 64 tokens
        and Mixtral-8x7B's GEMM2 at 64, and Mixtral's w4a16 and w8a16 0.4 to 8.1% slower at 1 and 16 tokens
        (docs/benchmarks/weight-only-h100.md, 2026-11-27)."""
        if not lc.GROUP_STEPS or self.weight_only is None:
            return 1
        group = self.weight_only.group_for(k)
        if group < UNROLLED_GROUP_MIN or lc.BLOCK_K <= group or lc.BLOCK_K % group or not self._scales_after_dot(lc, group, k):
            return 1
        return lc.BLOCK_K // group

    def _one_weight_scale_per_tile(self, lc: configs.LaunchConfig, gated: bool) -> bool:
        """Block-scaled schemes: whether every N tile lies in one weight block (and GEMM1's up rows start on a
        block boundary), so each K step multiplies by one scalar weight scale instead of a column vector."""
        i = self.config.intermediate_size
        return self.mode.scales == 2 and BLOCK_SCALE_GROUP % lc.BLOCK_N == 0 and (not gated or i % BLOCK_SCALE_GROUP == 0)

    @functools.cached_property
    def _words_fit(self) -> bool:
        """What every layer whose codes are stored as words (:mod:`moe_core_triton.words`) needs: GEMMs compiled for an
        sm_90 (:data:`NVIDIA_PTX` and :func:`wgmma_gpu`: only Hopper's wgmma is known to hand a thread a word's bytes,
        elsewhere the words' integer decode would cost more than decoding bytes as they are), a weight-only scheme with
        bfloat16 activations, and both GEMMs' codes in fragment order, whose whole chunks of 64 along K make w2's and
        w13's rows (the hidden size, twice the intermediate size) whole blocks of 16, as words need (a word spans rows
        x and x + 8)."""
        cfg, wo = self.config, self.weight_only
        return (NVIDIA_PTX and wo is not None and cfg.dtype == torch.bfloat16 and wo.permutes(cfg.hidden_size)
                and wo.permutes(cfg.intermediate_size) and wgmma_gpu())

    @functools.cached_property
    def e2m1_words(self) -> bool:
        """Whether this layer's e2m1 codes are stored as words (:mod:`moe_core_triton.e2m1_words`, ``W_CODES`` 4), where
        words fit (:attr:`_words_fit`; float16 and the interpreter, which flushes the bfloat16 subnormals the words'
        values are, keep the table). GEMM1 then runs GATE_UP tiles (:meth:`_gemm1_over_words`), which hold a word's
        gate and up rows."""
        return self._words_fit and self.weight_only.codes == 1

    @functools.cached_property
    def int4_words(self) -> bool:
        """Whether this layer's symmetric int4 codes (w4a16) are stored as words (:mod:`moe_core_triton.int4_words`,
        ``W_CODES`` 5), where words fit (:attr:`_words_fit`; float16 layers keep bytes: their prefill tiles scale the
        integer codes in float32). w13's words span gate rows x and x + 8, so GEMM1 then runs tiles that are not
        GATE_UP (:meth:`_gemm1_over_words`). int4 codes with zero points (w4a16-zp) keep bytes: their fastest GEMM1
        tile at 4096 tokens is a 256-row GATE_UP one (H100, Mixtral-8x7B: 7.0% slower on words after a search on
        them), and words sped their decode up by 0.4 to 6.5% only (w4a16: 1.3 to 9.9%, 4096 tokens 1.5 to 2.3%
        slower; docs/benchmarks/weight-only-h100.md, 2026-11-27)."""
        wo = self.weight_only
        return self._words_fit and wo.packed and wo.codes == 0 and wo.zero == 1

    @property
    def _stores_words(self) -> bool:
        """Whether this layer's codes are stored as words of either kind."""
        return self.e2m1_words or self.int4_words

    @property
    def _weight_codes(self) -> int:
        """``W_CODES``: 4 or 5 for e2m1 or int4 words, else what the scheme's codes are for the activations' dtype."""
        if self.e2m1_words:
            return 4
        if self.int4_words:
            return 5
        return (self.weight_only or NOT_WEIGHT_ONLY).codes_for(self.config.dtype)

    def codes_permuted(self, k: int) -> bool:
        """Whether this layer's weight codes of reduction size ``k`` are stored in fragment order
        (:meth:`WeightOnly.permutes`); never for schemes that are not weight-only."""
        return self.weight_only is not None and self.weight_only.permutes(k)

    @property
    def block_k_limit(self) -> int | None:
        """The largest BLOCK_K block scales allow (one scale group per K step), None if any."""
        return BLOCK_SCALE_GROUP if self.mode.scales == 2 else None

    def _gemm1_over_words(self, lc: configs.LaunchConfig) -> configs.LaunchConfig:
        """``lc`` for GEMM1 of a layer whose codes are words: over e2m1 words (:attr:`e2m1_words`) a GATE_UP tile with the
        same output columns (twice the rows, up to 256), the only tile that holds a word's gate and up rows; over int4
        words (:attr:`int4_words`) a tile that is not GATE_UP, the same weight rows, which holds a word's rows x and
        x + 8, and at most 128 token rows: two accumulators of 256 rows do not fit the registers (gemm.py; on the H100,
        with w4a16-zp stored as words then, Mixtral-8x7B's layer at 4096 tokens took 21.7 ms instead of 6.4 with its
        256-row GATE_UP entry run so)."""
        if self.e2m1_words and not lc.GATE_UP:
            return replace(lc, GATE_UP=True, BLOCK_N=min(2 * lc.BLOCK_N, 256))
        if self.int4_words and lc.GATE_UP:
            return replace(lc, GATE_UP=False, BLOCK_M=min(lc.BLOCK_M, 128))
        return lc

    def as_run(self, lc: configs.LaunchConfig, k: int, device: torch.device, gemm: int | None = None) -> configs.LaunchConfig:
        """``lc`` as this kernel runs it for reduction size ``k`` on ``device`` (tuned files and tuner candidates
        pass through here): weight-only schemes take a BLOCK_K whose tiles never straddle two scale groups
        unevenly, and load their codes through pointers (``TMA_B`` off), as do GPUs without TMA and layers
        whose weight rows are not a multiple of 16 bytes (a tensor descriptor's row stride must be); a
        :attr:`deterministic` kernel runs its tiles unsplit; ``GATE_UP`` tiles are weight-only GEMM1 tiles whose K is
        not split (a split GEMM1 sums its gate and up products apart), except over e2m1 words, whose GEMM1 (``gemm``
        1; :meth:`gemm_launch` applies it too) runs only GATE_UP tiles, and never over int4 words
        (:meth:`_gemm1_over_words`); ``GROUP_STEPS`` stays only where it changes the steps (:meth:`_group_steps`)."""
        if lc.TMA_B and (self.weight_only is not None or k * self._weight_bytes % 16 or not has_tma(device)):
            lc = replace(lc, TMA_B=False)
        if self.deterministic and lc.SPLIT_K > 1:
            lc = replace(lc, SPLIT_K=1)
        if lc.GATE_UP and (self.weight_only is None or (lc.SPLIT_K > 1 and not self.e2m1_words)):
            lc = replace(lc, GATE_UP=False)
        if self.weight_only is None:
            return replace(lc, GROUP_STEPS=False) if lc.GROUP_STEPS else lc
        if gemm == 1:
            lc = self._gemm1_over_words(lc)
        lc = replace(lc, BLOCK_K=self.weight_only.block_k(lc.BLOCK_K, k))
        return replace(lc, GROUP_STEPS=self._group_steps(lc, k) > 1)

    @property
    def _weight_bytes(self) -> int:
        """Bytes per weight element of the schemes TMA_B serves: 16-bit, or 8-bit codes of a quantized scheme."""
        return self.config.dtype.itemsize if self.weight_key is None else 1

    def _config(self, device: torch.device, rows: int, n: int, k: int, gemm: int, tokens: int) -> configs.LaunchConfig:
        quantized_8bit = self.activation_key is not None  # 8-bit MMA operands (weight-only schemes run 16-bit MMA)
        fallback = configs.heuristic(rows, self.config.local_num_experts, n, k, quantized_8bit, self.block_k_limit,
                                     self.codes_permuted(k))
        key = configs.shape_key(self.config.local_num_experts, n, k, self.scheme_name + ("-batched" if self.activation_format is ActivationFormat.BATCHED_EXPERTS else ""), gemm)
        return self.as_run(configs.choose(_device_name(device), key, tokens, fallback), k, device, gemm)

    def _quantize(self, a: torch.Tensor, static_scale: torch.Tensor | None, empty):
        if self.activation_key is None:
            return a, None
        return quantize_activations(a, self.activation_key, static_scale if self.activation_key.static else None, empty=empty)

    def _gemm(self, g: GemmLaunch, a, a_scale, b, b_scale, c, table: BlockTable | PairTable, *, row_div: int, up_offset: int = 0,
              topk_weights=None, c_row_div: int = 1, zero=None, global_scale=None, n: int | None = None, out_scale=None, sums=None):
        """One expert GEMM over ``table`` into ``c`` (GEMM1: ``up_offset`` = I, the up rows of w13); ``zero`` and
        ``global_scale``: a weight-only scheme's zero points (shaped like ``b_scale``) and per-expert scales;
        ``n``: the GEMM's N when ``c`` is wider (a split-K GEMM1's [rows, 2N] partial sums); ``out_scale``: the
        scales [rows, groups] of a ``QUANT_OUT`` launch, whose codes go to ``c``; ``sums``: (the layer's output
        [tokens, N], the column tiles' counters) of a ``SUM_PAIRS`` launch."""
        n = n or c.shape[1]
        lc = g.config
        a_s = a_scale if a_scale is not None else c  # placeholders are never read when SCALES == 0
        b_s = b_scale if b_scale is not None else c
        a_strides = a_s.stride() if a_scale is not None else (0, 0)
        b_strides = b_s.stride() if b_scale is not None else (0, 0, 0)
        sum_out, counters = sums if sums is not None else (c, c)
        g.launch(
            (cdiv(table.capacity, lc.BLOCK_M) * cdiv(n, g.columns), lc.SPLIT_K),
            a, b, c, a_s, b_s, topk_weights if topk_weights is not None else c,
            zero if zero is not None else c, global_scale if global_scale is not None else c,
            weight_descriptor(b, lc) if lc.TMA_B else b, out_scale if out_scale is not None else c, sum_out, counters,
            *table.kernel_args, n, a.shape[1], row_div, c_row_div, up_offset, self.config.swiglu_limit or 0.0,
            *a.stride(), *b.stride(), *c.stride(), *a_strides, *b_strides, out_scale.stride(0) if out_scale is not None else 0,
            sum_out.stride(0),
        )


class TritonBatchedKernel(TritonKernel):
    """The same kernels for the BATCHED_EXPERTS activation format."""

    backend_name = "triton_batched"

    def as_run(self, lc: configs.LaunchConfig, k: int, device: torch.device, gemm: int | None = None) -> configs.LaunchConfig:
        """As for the standard format, without split K: the batched GEMM2 writes rows, it sums nothing."""
        return replace(super().as_run(lc, k, device, gemm), SPLIT_K=1)
