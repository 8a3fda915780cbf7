"""How the warp-specialized decode layer (ws_decode.py) tiles a forward, and the layers it cannot take: plain Python,
importable without Gluon (supports() asks it on any machine)."""

from __future__ import annotations

from dataclasses import dataclass

#: Rows and columns of every weight tile: one wgmma M of a 4-warp consumer, and 128 bytes of 16-bit K per row (the
#: 128-byte swizzle).
TILE_SIZE = 64
#: Elements of one ring slot (two TILE x TILE weight tiles).
SLOT_ELEMENTS = 2 * TILE_SIZE * TILE_SIZE
#: Shared memory one block may use on sm_90 (the opt-in maximum, bytes: compile_check.SHARED_MEMORY_LIMIT), less a margin
#: for the barriers and what the compiler adds.
SHARED_BUDGET = 232448 - 8192
#: Ring slots a plan takes at most: 8 slots of 16-bit tiles keep 128 KiB of weights in flight per SM.
MAX_STAGES = 8
#: The fewest ring slots that let the producer load one slot while the consumer multiplies another.
MIN_STAGES = 2
#: Pair rows per block: 8 (the smallest wgmma N) up to this many; more rows would take the shared memory the ring needs.
MAX_BLOCK_M = 16
#: Forwards of at most this many tokens take one block per pair instead of a block table: no table launch before the
#: layer's. One token's top-k experts are distinct, so no expert's weights are read twice; two tokens' pairs can share
#: experts, whose weights each pair would then read again.
PAIR_ITEMS_MAX_TOKENS = 1


@dataclass(frozen=True)
class DecodePlan:
    """How a forward runs: ``block_m`` pair rows per block (the wgmma N), ``stages`` ring slots, and whether its blocks
    are one pair each (``pair_items``, no block table) rather than a block table's."""

    block_m: int
    stages: int
    pair_items: bool = False


def _rows_bytes(hidden: int, itemsize: int, block_m: int) -> int:
    """Shared memory of a block's gathered token rows and its intermediate tile."""
    return itemsize * block_m * (hidden + TILE_SIZE)


def size_problems(hidden: int, intermediate: int, itemsize: int, block_m: int = MAX_BLOCK_M) -> list[str]:
    """Why a layer of these sizes cannot run with ``block_m``-row blocks (empty: it can). TMA tiles of the flattened
    ``[E * 2I, H]`` and ``[E * H, I]`` weights must not cross an expert (GEMM2 takes two tiles of H per slot), and a
    block's rows plus :data:`MIN_STAGES` ring slots must fit in its shared memory."""
    problems = [f"{what}={size} is not a multiple of {multiple}, which its weight tiles need"
                for what, size, multiple in (("hidden_size", hidden, 2 * TILE_SIZE), ("intermediate_size", intermediate, TILE_SIZE))
                if size % multiple]
    if _rows_bytes(hidden, itemsize, block_m) + MIN_STAGES * SLOT_ELEMENTS * itemsize > SHARED_BUDGET:
        problems.append(f"hidden_size={hidden}: {block_m} gathered token rows and {MIN_STAGES} weight slots exceed a block's shared memory")
    return problems


def decode_plan(tokens: int, hidden: int, intermediate: int, itemsize: int) -> DecodePlan | None:
    """The plan for ``tokens`` tokens (at least one) of a layer, None where :func:`size_problems` names one. An expert
    gets at most ``tokens`` pairs, so a block takes 8 rows up to 8 tokens, else :data:`MAX_BLOCK_M`; the ring takes
    what the rows leave, up to :data:`MAX_STAGES` slots; up to :data:`PAIR_ITEMS_MAX_TOKENS` tokens, one pair per block."""
    block_m = 8 if tokens <= 8 else MAX_BLOCK_M
    if size_problems(hidden, intermediate, itemsize, block_m):
        return None
    stages = min(MAX_STAGES, (SHARED_BUDGET - _rows_bytes(hidden, itemsize, block_m)) // (itemsize * SLOT_ELEMENTS))
    return DecodePlan(block_m, stages, pair_items=tokens <= PAIR_ITEMS_MAX_TOKENS)
