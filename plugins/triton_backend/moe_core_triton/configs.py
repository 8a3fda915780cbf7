"""Launch configurations: tuned data files per device and shape, with a heuristic elsewhere; and the one-launch
layer's configurations (``gemm=fused`` keys, :func:`choose_fused`), where a data file names them only.

A data file ``<device>.json`` maps a shape key ``"E=128,N=768,K=2048,scheme=unquantized,gemm=1"`` to
``{tokens: config}``; the entry with the nearest token count at or above the actual one is used, else the nearest
below, if within a factor of :data:`REACH`; otherwise the heuristic. Two files serve a device: the one this package
ships (:data:`CONFIG_DIR`) and the user's own (:func:`user_file`, in moe-core's per-user cache directory, where
``python -m moe_core_triton.tune`` writes); the user's entry for a (shape, token count) wins.
"""

from __future__ import annotations

import functools
import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from moe_core.user_dirs import cache_path

#: The data files this package ships, one per device.
CONFIG_DIR = Path(__file__).with_name("configs")


@dataclass(frozen=True)
class LaunchConfig:
    """Tile sizes and launch options of one expert GEMM, which data files may choose per token count:
    ``SWAP_AB`` computes the transposed product (weights as the MMA's first operand), ``SPLIT_K``
    splits the K loop over that many programs, ``TMA_B`` loads the weight tiles with the Hopper tensor
    memory accelerator, ``GATE_UP`` (a weight-only GEMM1) takes BLOCK_N / 2 gate rows and their up rows in one tile
    and one accumulator (see gemm.py), ``GROUP_STEPS`` runs a weight-only decode tile's K step of several scale
    groups as one step a group, each group's product scaled (:meth:`moe_core_triton.kernel.TritonKernel.k_steps`),
    and ``MMA_IN_FLIGHT`` compiles the K loop with no path around it, so that ptxas may keep a step's wgmma in flight
    instead of waiting for each (see gemm.py)."""

    BLOCK_M: int
    BLOCK_N: int
    BLOCK_K: int
    GROUP_M: int
    num_warps: int
    num_stages: int
    SWAP_AB: bool = False
    SPLIT_K: int = 1
    TMA_B: bool = False
    GATE_UP: bool = False
    GROUP_STEPS: bool = False
    MMA_IN_FLIGHT: bool = False

    def __post_init__(self):
        for name in ("BLOCK_M", "BLOCK_N", "BLOCK_K"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 16 or value & (value - 1):
                raise ValueError(f"LaunchConfig.{name} must be a power of two >= 16, got {value!r}: fix or re-tune the entry")
        for name in ("GROUP_M", "num_warps", "num_stages", "SPLIT_K"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"LaunchConfig.{name} must be a positive int, got {value!r}: fix or re-tune the entry")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class FusedConfig:
    """Tiles and launch options of the one-launch layer (:mod:`moe_core_triton.fused`): ``BLOCK_M`` pair rows per block, ``COLS`` intermediate
    columns per program in a tile of ``BLOCK_N`` (rows past COLS are masked: COLS need not be a power of two, so a
    layer's programs can come near one per SM), ``BLOCK_K`` hidden elements per GEMM1 step, ``BLOCK_H`` output columns
    per GEMM2 step."""

    BLOCK_M: int
    BLOCK_N: int
    COLS: int
    BLOCK_K: int
    BLOCK_H: int
    num_warps: int
    num_stages: int

    def __post_init__(self):
        for name in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "BLOCK_H"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 16 or value & (value - 1):
                raise ValueError(f"FusedConfig.{name} must be a power of two >= 16, got {value!r}: fix or re-tune the entry")
        if not isinstance(self.COLS, int) or not 1 <= self.COLS <= self.BLOCK_N:
            raise ValueError(f"FusedConfig.COLS must be an int in [1, BLOCK_N = {self.BLOCK_N}], got {self.COLS!r}: fix or re-tune the entry")
        for name in ("num_warps", "num_stages"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"FusedConfig.{name} must be a positive int, got {value!r}: fix or re-tune the entry")

    def to_dict(self) -> dict:
        return asdict(self)


def shape_key(experts: int, n: int, k: int, scheme: str, gemm: int) -> str:
    return f"E={experts},N={n},K={k},scheme={scheme},gemm={gemm}"


def device_file_name(device_name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in device_name).strip("_").lower() + ".json"


def user_config_dir() -> Path:
    """Where the user's data files live: ``<cache dir>/triton/configs`` in moe-core's per-user cache directory
    (``MOE_CORE_CACHE_DIR``, else ``$XDG_CACHE_HOME/moe-core``, else ``~/.cache/moe-core``: moe_core.user_dirs)."""
    return cache_path("triton", "configs")


def user_file(device_name: str) -> Path:
    """The user's data file for ``device_name``, where ``python -m moe_core_triton.tune`` writes."""
    return user_config_dir() / device_file_name(device_name)


def data_files() -> list[Path]:
    """Every data file that may serve some device: the packaged ones, then the user's."""
    return sorted(CONFIG_DIR.glob("*.json")) + sorted(user_config_dir().glob("*.json"))


def _load(device_name: str) -> dict:
    """The packaged data file of ``device_name`` with the user's entries over it, per (shape key, token count)."""
    merged: dict[str, dict] = {}
    for path in (CONFIG_DIR / device_file_name(device_name), user_file(device_name)):
        for key, table in _read(path).items():
            merged.setdefault(key, {}).update(table)
    return merged


def _read(path: Path) -> dict:
    """A data file's contents ({} when absent), read again only when the file changes."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return {}
    return _read_cached(path, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=16)
def _read_cached(path: Path, mtime_ns: int, size: int) -> dict:
    return json.loads(path.read_text())


def heuristic(pairs: int, experts: int, n: int, k: int, quantized_8bit: bool, block_k_limit: int | None,
              permuted_codes: bool = False) -> LaunchConfig:
    """A sound default: small BLOCK_M when each expert sees few rows (weight streaming), large otherwise.
    Weight-only codes stored in fragment order (``permuted_codes``, :mod:`moe_core_triton.k_order`) take the
    transposed product (SWAP_AB), which reads them as the MMA's register operand, on prefill in the tile that
    measured fastest for them on the H100: every full tile search on such codes picked a swapped tile there
    (docs/benchmarks/weight-only-h100.md). Swapped tiles on K-ordered codes load them a pair at a time, and
    measured up to 27% slower than this default at 4096 tokens (same file)."""
    rows_per_expert = pairs / max(experts, 1)
    block_k = 128 if quantized_8bit else 64
    if block_k_limit is not None:
        block_k = min(block_k, block_k_limit)
    if rows_per_expert <= 16:
        lc = LaunchConfig(16, 64, block_k, 1, 4, 4)
    elif rows_per_expert <= 64:
        lc = LaunchConfig(32, 64, block_k, 8, 4, 4)
    elif rows_per_expert <= 256:
        lc = LaunchConfig(64, 128, block_k, 8, 4, 3)
    elif permuted_codes:
        lc = LaunchConfig(128, 64, block_k, 8, 4, 4)
    else:
        lc = LaunchConfig(128, 128, block_k, 8, 8, 3)
    return replace(lc, SWAP_AB=True) if permuted_codes else lc


#: A tuned entry serves token counts within this factor of the count it was tuned at; farther away (a
#: table tuned only for decode, asked about prefill) the heuristic serves, since a tile picked for 64
#: tokens can be several times slower at 4096 (measured on the H100, docs/benchmarks/weight-only-h100.md).
REACH = 4


def choose(device_name: str, key: str, tokens: int, fallback: LaunchConfig) -> LaunchConfig:
    """The tuned config for (device, shape, tokens): of the entries tuned within :data:`REACH` times
    ``tokens`` either way, the one at the nearest count at or above ``tokens``, else the nearest below;
    ``fallback`` when there is none."""
    table = _load(device_name).get(key) or {}
    near = sorted(t for t in map(int, table) if tokens / REACH <= t <= tokens * REACH)
    if not near:
        return fallback
    pick = next((t for t in near if t >= tokens), near[-1])
    return LaunchConfig(**table[str(pick)])


def every_fused_config() -> set[FusedConfig]:
    """Every distinct one-launch config that any device's data file names (``gemm=fused`` keys), for checks that must
    cover whatever a forward on some GPU can launch."""
    return {FusedConfig(**entry) for path in data_files()
            for key, table in _read(path).items() if key.endswith(",gemm=fused")
            for entry in table.values() if entry is not None}


def choose_fused(device_name: str, key: str, tokens: int) -> FusedConfig | None:
    """The one-launch layer's config for (device, layer shape ``key`` with ``gemm=fused``, tokens): the entry at the
    nearest tuned count at or above ``tokens``. None, the two GEMMs, where that entry is null (they measured faster)
    or ``tokens`` is past every tuned count: the fused layer pays only for few pairs (:mod:`moe_core_triton.fused`)."""
    table = _load(device_name).get(key) or {}
    above = sorted(t for t in map(int, table) if t >= tokens)
    entry = table[str(above[0])] if above else None
    return FusedConfig(**entry) if entry is not None else None
