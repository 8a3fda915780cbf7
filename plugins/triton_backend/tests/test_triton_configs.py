"""Which tuned entry serves a token count: the nearest at or above, else below, within configs.REACH;
the heuristic beyond (a table tuned for decode only must not serve prefill)."""

import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moe_core_triton import configs

KEY = "E=128,N=768,K=2048,scheme=w8a16,gemm=1"
FALLBACK = configs.LaunchConfig(128, 128, 64, 8, 8, 3)


def tuned(*token_counts: int) -> dict:
    """A data file with KEY tuned at ``token_counts``; each entry's num_stages records its count."""
    return {KEY: {str(t): configs.LaunchConfig(16, 64, 64, 1, 4, t).to_dict() for t in token_counts}}


@pytest.mark.parametrize("tokens, tuned_at, served_by", [
    (16, (1, 16, 64, 256, 1024, 4096), 16),  # an exact entry
    (100, (1, 16, 64, 256, 1024, 4096), 256),  # between entries: the one at or above
    (5000, (1, 16, 64, 256, 1024, 4096), 4096),  # above the table, within reach: the largest
    (2, (1, 16, 64), 1),  # 16 is out of reach (8x): the entry below
    (256, (1, 16, 64), 64),  # decode-only table, 4x above its largest entry
    (1024, (4096,), 4096),  # prefill-only table, 4x below its smallest entry
    (4096, (1, 16, 64), None),  # decode-only table asked about prefill: the heuristic
    (256, (4096,), None),  # 16x below: the heuristic
])
def test_a_tuned_entry_serves_token_counts_within_reach(monkeypatch, tokens, tuned_at, served_by):
    monkeypatch.setattr(configs, "_load", lambda device: tuned(*tuned_at))
    picked = configs.choose("gpu", KEY, tokens, FALLBACK)
    assert picked == (FALLBACK if served_by is None else configs.LaunchConfig(16, 64, 64, 1, 4, served_by))


def test_an_untuned_shape_or_device_gets_the_fallback(monkeypatch):
    monkeypatch.setattr(configs, "_load", lambda device: tuned(16))
    assert configs.choose("gpu", KEY.replace("gemm=1", "gemm=2"), 16, FALLBACK) is FALLBACK
    monkeypatch.setattr(configs, "_load", lambda device: {})
    assert configs.choose("gpu", KEY, 16, FALLBACK) is FALLBACK


def test_the_shipped_h100_file_loads_and_serves_its_own_token_counts(tmp_path, monkeypatch):
    monkeypatch.setenv("MOE_CORE_CACHE_DIR", str(tmp_path))  # no user file over it
    name = "NVIDIA H100 80GB HBM3"
    data = configs._load(name)
    assert data, "the H100 data file is missing"
    for key, table in data.items():
        for tokens, entry in table.items():
            if key.endswith("gemm=fused"):  # the one-launch layer's entries; null: the two GEMMs
                assert configs.choose_fused(name, key, int(tokens)) == (configs.FusedConfig(**entry) if entry else None)
            else:
                assert configs.choose(name, key, int(tokens), FALLBACK) == configs.LaunchConfig(**entry)


@pytest.mark.parametrize("field, value", [("BLOCK_M", 24), ("BLOCK_K", 8), ("BLOCK_N", "64"), ("SPLIT_K", 0), ("num_warps", -4)])
def test_a_broken_entry_is_refused_with_the_field_it_breaks(field, value):
    entry = configs.LaunchConfig(16, 64, 64, 1, 4, 4).to_dict() | {field: value}
    with pytest.raises(ValueError, match=f"LaunchConfig.{field} must be"):
        configs.LaunchConfig(**entry)


@pytest.mark.parametrize("pairs", [8, 512, 4096, 32768])
def test_the_heuristic_swaps_tiles_of_codes_in_fragment_order_only(pairs):
    """Untuned shapes: weight-only codes in fragment order get the transposed product at every size (it reads them as
    the MMA's register operand), in the H100's fastest tile for them beyond 256 rows per expert; every other layer
    keeps the plain product (and the block-scale limit on BLOCK_K)."""
    plain = configs.heuristic(pairs, 8, 768, 2048, quantized_8bit=True, block_k_limit=128)
    k_order = configs.heuristic(pairs, 8, 768, 2048, quantized_8bit=False, block_k_limit=None)
    swapped = configs.heuristic(pairs, 8, 768, 2048, quantized_8bit=False, block_k_limit=None, permuted_codes=True)
    assert not plain.SWAP_AB and plain.BLOCK_K == 128 and not k_order.SWAP_AB and k_order.BLOCK_K == 64
    assert swapped.SWAP_AB and swapped.BLOCK_K == 64 and swapped.BLOCK_M == plain.BLOCK_M
    assert (swapped.BLOCK_N, swapped.num_warps) == ((64, 4) if pairs / 8 > 256 else (plain.BLOCK_N, plain.num_warps))


def test_the_users_entries_win_over_the_packaged_ones_per_token_count(tmp_path, monkeypatch):
    """The user's data file (written by the tuner under MOE_CORE_CACHE_DIR) is read over the packaged one: its
    (shape, token count) entries win, the packaged entries it does not name still serve, its new shapes are added."""
    name = "NVIDIA H100 80GB HBM3"
    packaged = configs._read(configs.CONFIG_DIR / configs.device_file_name(name))
    key, table = next((k, t) for k, t in sorted(packaged.items()) if not k.endswith("gemm=fused") and len(t) > 1)
    mine, kept = sorted(table, key=int)[:2]
    own = configs.LaunchConfig(16, 32, 32, 1, 2, 2)
    monkeypatch.setenv("MOE_CORE_CACHE_DIR", str(tmp_path))
    assert configs.user_file(name) == tmp_path / "triton" / "configs" / "nvidia_h100_80gb_hbm3.json"
    configs.user_file(name).parent.mkdir(parents=True)
    configs.user_file(name).write_text(json.dumps({key: {mine: own.to_dict()}, KEY: tuned(64)[KEY]}))
    assert configs.choose(name, key, int(mine), FALLBACK) == own
    assert configs.choose(name, key, int(kept), FALLBACK) == configs.LaunchConfig(**table[kept])
    assert configs.choose(name, KEY, 64, FALLBACK) == configs.LaunchConfig(16, 64, 64, 1, 4, 64)
    fused = configs.FusedConfig(16, 32, 24, 128, 128, 4, 3)
    configs.user_file(name).write_text(json.dumps({"E=8,N=64,K=64,scheme=unquantized,gemm=fused": {"1": fused.to_dict()}}))
    assert fused in configs.every_fused_config()
    assert configs.choose(name, key, int(mine), FALLBACK) == configs.LaunchConfig(**table[mine])  # the file changed: read again


TABLES = st.dictionaries(st.sampled_from([KEY, KEY.replace("gemm=1", "gemm=2"), KEY.replace("w8a16", "fp8")]),
                         st.dictionaries(st.sampled_from(["1", "16", "64", "4096"]), st.integers(1, 8), max_size=4), max_size=3)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(packaged=TABLES, users=TABLES)
def test_every_entry_is_the_users_where_it_has_one_else_the_packaged_one(packaged, users):
    """_load's merge, for any two files: the keys and token counts of both, the user's value wherever it names one."""
    real_read = configs._read
    try:
        configs._read = lambda path: packaged if path.parent == configs.CONFIG_DIR else users
        merged = configs._load("gpu")
    finally:
        configs._read = real_read
    assert set(merged) == set(packaged) | set(users)
    for key, table in merged.items():
        assert set(table) == set(packaged.get(key, {})) | set(users.get(key, {}))
        for tokens, value in table.items():
            assert value == users.get(key, {}).get(tokens, packaged.get(key, {}).get(tokens))


def test_shape_keys_and_file_names_are_spelled_as_the_data_files_spell_them():
    assert configs.shape_key(128, 768, 2048, "unquantized", 1) == "E=128,N=768,K=2048,scheme=unquantized,gemm=1"
    assert configs.device_file_name("NVIDIA H100 80GB HBM3") == "nvidia_h100_80gb_hbm3.json"
    assert configs.device_file_name(" (Tesla V100-SXM2) ") == "tesla_v100_sxm2.json"  # no leading or trailing "_"
    assert configs.device_file_name("NVIDIA TITAN X") == "nvidia_titan_x.json"


def test_data_files_are_the_packaged_ones_then_the_users(tmp_path, monkeypatch):
    monkeypatch.setenv("MOE_CORE_CACHE_DIR", str(tmp_path))
    assert configs.user_config_dir() == tmp_path / "triton" / "configs"
    configs.user_config_dir().mkdir(parents=True)
    for name in ("b_gpu.json", "a_gpu.json", "notes.txt"):
        (configs.user_config_dir() / name).write_text("{}")
    files = configs.data_files()
    assert files[-2:] == [configs.user_config_dir() / "a_gpu.json", configs.user_config_dir() / "b_gpu.json"]
    assert configs.CONFIG_DIR / "nvidia_h100_80gb_hbm3.json" in files[:-2]
    assert all(path.parent == configs.CONFIG_DIR and path.suffix == ".json" for path in files[:-2])


def test_a_data_file_is_read_again_when_its_time_or_size_changes(tmp_path):
    """The cache of parsed files is keyed by modification time and size: a rewrite changes one of them (timestamps
    are set here, since two writes may land in one tick of the file system's clock)."""
    path = tmp_path / "gpu.json"

    def write(text, mtime_ns):
        path.write_text(text)
        os.utime(path, ns=(mtime_ns, mtime_ns))
        return configs._read(path)

    assert configs._read(tmp_path / "absent.json") == {}
    assert write('{"a": {}}', 10**18) == {"a": {}}
    assert write('{"b": {}}', 10**18 + 1) == {"b": {}}  # same size, newer
    assert write('{"cc": {}}', 10**18 + 1) == {"cc": {}}  # same time, larger


def _tile(block_m, block_n, block_k, group_m, warps, stages, **flags):
    return configs.LaunchConfig(block_m, block_n, block_k, group_m, warps, stages, **flags)


#: The heuristic's tiles by rows per expert (pairs / experts, a fraction where they do not divide), BLOCK_K 64.
DECODE, SMALL, MEDIUM, LARGE = _tile(16, 64, 64, 1, 4, 4), _tile(32, 64, 64, 8, 4, 4), _tile(64, 128, 64, 8, 4, 3), _tile(128, 128, 64, 8, 8, 3)


@pytest.mark.parametrize("pairs, experts, want", [
    (1, 8, DECODE), (128, 8, DECODE), (129, 8, SMALL),  # 16 rows per expert, 16.125
    (33, 2, SMALL),  # 16.5 rows per expert: not 16
    (512, 8, SMALL), (513, 8, MEDIUM), (2048, 8, MEDIUM), (2049, 8, LARGE), (1 << 20, 8, LARGE),
    (16, 0, DECODE), (17, 0, SMALL),  # no local experts: rows per expert are the pairs
    (17, 1, SMALL), (0, 8, DECODE),
])
def test_the_heuristic_takes_larger_tiles_as_each_expert_sees_more_rows(pairs, experts, want):
    assert configs.heuristic(pairs, experts, 768, 2048, quantized_8bit=False, block_k_limit=None) == want


@pytest.mark.parametrize("pairs, want", [(128, DECODE), (129, SMALL), (513, MEDIUM), (2048, MEDIUM), (2049, _tile(128, 64, 64, 8, 4, 4))])
def test_the_heuristic_swaps_every_tile_of_codes_in_fragment_order(pairs, want):
    got = configs.heuristic(pairs, 8, 768, 2048, quantized_8bit=False, block_k_limit=None, permuted_codes=True)
    assert got == configs.LaunchConfig(**want.to_dict() | {"SWAP_AB": True})


@pytest.mark.parametrize("quantized_8bit, block_k_limit, block_k", [
    (False, None, 64), (True, None, 128), (True, 128, 128), (True, 256, 128), (True, 64, 64), (False, 32, 32), (False, 128, 64),
])
def test_the_heuristic_takes_128_wide_k_steps_on_8_bit_weights_within_the_block_scale_limit(quantized_8bit, block_k_limit, block_k):
    for pairs in (8, 4096):
        tile = configs.heuristic(pairs, 8, 768, 2048, quantized_8bit=quantized_8bit, block_k_limit=block_k_limit)
        assert tile.BLOCK_K == block_k and not tile.SWAP_AB


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.integers(0, 1 << 16), st.integers(0, 1 << 16), st.integers(0, 512), st.booleans())
def test_the_heuristic_never_shrinks_a_tile_as_rows_grow(fewer, more, experts, permuted):
    fewer, more = sorted((fewer, more))
    small = configs.heuristic(fewer, experts, 768, 2048, quantized_8bit=False, block_k_limit=None, permuted_codes=permuted)
    large = configs.heuristic(more, experts, 768, 2048, quantized_8bit=False, block_k_limit=None, permuted_codes=permuted)
    assert small.BLOCK_M <= large.BLOCK_M and small.GROUP_M <= large.GROUP_M
    assert small.SWAP_AB == large.SWAP_AB == permuted


def _refusal(cls, *fields) -> str:
    with pytest.raises(ValueError) as refused:
        cls(*fields)
    return str(refused.value)


@pytest.mark.parametrize("index, field", [(0, "BLOCK_M"), (1, "BLOCK_N"), (2, "BLOCK_K")])
def test_launch_config_tiles_are_powers_of_two_from_16(index, field):
    def with_(value):
        fields = [16, 64, 64, 1, 4, 4]
        fields[index] = value
        return fields

    for value in (16, 32, 256, 1024):
        assert getattr(configs.LaunchConfig(*with_(value)), field) == value
    for value in (8, 0, -16, 24, 48, 17, 96, 64.0, "64", None):
        assert _refusal(configs.LaunchConfig, *with_(value)) == \
            f"LaunchConfig.{field} must be a power of two >= 16, got {value!r}: fix or re-tune the entry"


@pytest.mark.parametrize("field", ["GROUP_M", "num_warps", "num_stages", "SPLIT_K"])
def test_launch_config_counts_are_positive_ints(field):
    base = configs.LaunchConfig(16, 64, 64, 1, 4, 4).to_dict()
    for value in (1, 3):
        assert getattr(configs.LaunchConfig(**base | {field: value}), field) == value
    for value in (0, -1, 2.0, "4", None):
        with pytest.raises(ValueError) as refused:
            configs.LaunchConfig(**base | {field: value})
        assert str(refused.value) == f"LaunchConfig.{field} must be a positive int, got {value!r}: fix or re-tune the entry"


def test_configs_round_trip_through_their_dicts():
    tile = configs.LaunchConfig(32, 64, 128, 8, 4, 3, SWAP_AB=True, SPLIT_K=2, TMA_B=True, GATE_UP=True, GROUP_STEPS=True,
                                MMA_IN_FLIGHT=True)
    assert tile.to_dict() == {"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 128, "GROUP_M": 8, "num_warps": 4, "num_stages": 3,
                              "SWAP_AB": True, "SPLIT_K": 2, "TMA_B": True, "GATE_UP": True, "GROUP_STEPS": True,
                              "MMA_IN_FLIGHT": True}
    assert configs.LaunchConfig(16, 64, 64, 1, 4, 4).to_dict() == {
        "BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 64, "GROUP_M": 1, "num_warps": 4, "num_stages": 4, "SWAP_AB": False,
        "SPLIT_K": 1, "TMA_B": False, "GATE_UP": False, "GROUP_STEPS": False, "MMA_IN_FLIGHT": False}
    fused = configs.FusedConfig(16, 64, 48, 128, 32, 8, 2)
    assert fused.to_dict() == {"BLOCK_M": 16, "BLOCK_N": 64, "COLS": 48, "BLOCK_K": 128, "BLOCK_H": 32, "num_warps": 8, "num_stages": 2}
    assert configs.FusedConfig(**fused.to_dict()) == fused


@pytest.mark.parametrize("index, field", [(0, "BLOCK_M"), (1, "BLOCK_N"), (3, "BLOCK_K"), (4, "BLOCK_H")])
def test_fused_config_tiles_are_powers_of_two_from_16(index, field):
    def with_(value):
        fields = [16, 64, 16, 64, 64, 4, 3]
        fields[index] = value
        return fields

    for value in (16, 32, 512):
        assert getattr(configs.FusedConfig(*with_(value)), field) == value
    for value in (8, 0, 24, 48, 17, 64.0, "64"):
        assert _refusal(configs.FusedConfig, *with_(value)) == \
            f"FusedConfig.{field} must be a power of two >= 16, got {value!r}: fix or re-tune the entry"


def test_fused_config_cols_lie_in_one_to_block_n():
    """COLS need not be a power of two (rows past it are masked), but must be a row of the BLOCK_N tile."""
    for cols in (1, 24, 47, 64):
        assert configs.FusedConfig(16, 64, cols, 64, 64, 4, 3).COLS == cols
    for cols in (0, -1, 65, 128, 24.0, "24"):
        assert _refusal(configs.FusedConfig, 16, 64, cols, 64, 64, 4, 3) == \
            f"FusedConfig.COLS must be an int in [1, BLOCK_N = 64], got {cols!r}: fix or re-tune the entry"


@pytest.mark.parametrize("index, field", [(5, "num_warps"), (6, "num_stages")])
def test_fused_config_launch_options_are_positive_ints(index, field):
    fields = [16, 64, 16, 64, 64, 4, 3]
    for value in (1, 8):
        fields[index] = value
        assert getattr(configs.FusedConfig(*fields), field) == value
    for value in (0, -2, 4.0, "4"):
        fields[index] = value
        assert _refusal(configs.FusedConfig, *fields) == \
            f"FusedConfig.{field} must be a positive int, got {value!r}: fix or re-tune the entry"


FUSED_KEY = "E=8,N=64,K=64,scheme=unquantized,gemm=fused"
FUSED_1, FUSED_64 = configs.FusedConfig(16, 32, 24, 64, 64, 4, 3), configs.FusedConfig(32, 64, 40, 64, 128, 8, 2)


@pytest.mark.parametrize("tokens, want", [
    (0, FUSED_1), (1, FUSED_1),
    (2, None), (16, None),  # the entry at 16 is null: the two GEMMs measured faster there
    (17, FUSED_64), (64, FUSED_64),
    (65, None),  # past every tuned count
])
def test_the_fused_layer_serves_token_counts_up_to_the_nearest_tuned_count_at_or_above(monkeypatch, tokens, want):
    table = {FUSED_KEY: {"64": FUSED_64.to_dict(), "1": FUSED_1.to_dict(), "16": None}}
    monkeypatch.setattr(configs, "_load", lambda device: table)
    assert configs.choose_fused("gpu", FUSED_KEY, tokens) == want
    assert configs.choose_fused("gpu", FUSED_KEY.replace("E=8", "E=16"), tokens) is None  # an untuned layer


def test_every_fused_config_lists_the_fused_entries_of_every_data_file(tmp_path, monkeypatch):
    own = tmp_path / "my_gpu.json"
    own.write_text(json.dumps({FUSED_KEY: {"1": FUSED_1.to_dict(), "16": None, "64": FUSED_64.to_dict()},
                               KEY: tuned(16)[KEY],  # not a fused key
                               KEY.replace("gemm=1", "gemm=fused"): {"4": FUSED_1.to_dict()}}))
    other = tmp_path / "other_gpu.json"
    other.write_text(json.dumps({FUSED_KEY: {"8": FUSED_64.to_dict()}}))
    monkeypatch.setattr(configs, "data_files", lambda: [own, other, tmp_path / "absent.json"])
    assert configs.every_fused_config() == {FUSED_1, FUSED_64}
