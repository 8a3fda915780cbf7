"""Which tuned entry serves a token count: the nearest at or above, else below, within configs.REACH;
the heuristic beyond (a table tuned for decode only must not serve prefill)."""

import json

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
