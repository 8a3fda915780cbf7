"""The tuner launches each GEMM as the layer does (weight-only schemes included) and keeps the fastest
candidate; on a CPU it runs in the interpreter with a stand-in timer (timing itself needs CUDA events)."""

import dataclasses
import itertools
import json
import subprocess

import pytest
import torch

from moe_core.numerics import tolerance
from moe_core.presets import model
from moe_core.quant import GroupShape, QuantDtype, QuantKey, scheme
from moe_core_triton import configs, tune
from moe_core_triton import kernel as kernel_module
from moe_core_triton.kernel import TritonKernel
from moe_core_triton.tune import candidates, tune_case

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
HERE = torch.device(DEVICE)


@pytest.mark.parametrize("name", ["unquantized", "w4a16-zp", "nvfp4-w4a16"])
def test_tune_case_runs_every_candidate_and_keeps_the_fastest(name, monkeypatch):
    monkeypatch.setattr(tune, "_TILES", tune._TILES[:2])  # every variant (swapped, split) of two tiles: 12 per GEMM
    timed = []
    times = (100 * 0.9 ** i for i in itertools.count())  # each candidate 10% "faster" than the one before: the last wins

    def timer(run):
        timed.append(run)
        return next(times) * 1e-6

    best = tune_case("tiny", name, tokens=3, device=DEVICE, timer=timer)
    cfg = model("tiny").config()
    kernel = TritonKernel(cfg, *scheme(name).keys)
    def tried(k, gemm):  # codes in fragment order: swapped tiles only
        found = candidates(3 * cfg.top_k / cfg.num_experts, None, kernel.weight_only is not None, swapped_only=kernel.codes_permuted(k),
                           gate_up=gemm == 1 and kernel.weight_only is not None)
        return list(dict.fromkeys(kernel.as_run(c, k, HERE, gemm) for c in found))

    per_gemm = {gemm: tried(k, gemm) for gemm, k in ((1, cfg.hidden_size), (2, cfg.intermediate_size))}
    # the last candidate was the fastest, then the same with MMA_IN_FLIGHT, timed after it, faster still
    assert best == {gemm: dataclasses.replace(found[-1], MMA_IN_FLIGHT=True) for gemm, found in per_gemm.items()}
    assert not any(c.MMA_IN_FLIGHT for found in per_gemm.values() for c in found)
    assert len(timed) == sum(len(found) + 1 for found in per_gemm.values())  # none was skipped as failing


def test_a_split_k_config_is_chosen_only_when_it_is_clearly_faster():
    plain, swapped = configs.LaunchConfig(16, 64, 128, 1, 4, 4), configs.LaunchConfig(16, 64, 128, 1, 4, 4, SWAP_AB=True)
    split = configs.LaunchConfig(16, 64, 128, 1, 4, 4, SPLIT_K=2)
    margin = 1 + tune.SPLIT_K_MARGIN
    assert tune.fastest([(12.0, plain), (10.0, split), (10.2, swapped)]) == (10.2, swapped)  # within the margin
    assert tune.fastest([(10.0 * margin + 0.1, plain), (10.0, split)]) == (10.0, split)
    assert tune.fastest([(10.0, split)]) == (10.0, split)  # no unsplit candidate ran
    assert tune.fastest([(9.0, plain), (10.0, swapped)]) == (9.0, plain)


def test_the_transposed_product_is_a_candidate_for_few_rows_per_expert_or_weight_only_schemes():
    decode, prefill = candidates(2.0, None), candidates(512.0, None)
    assert {c.SWAP_AB for c in decode} == {False, True} and len(decode) == 2 * len({c for c in decode if not c.SWAP_AB})
    assert not any(c.SWAP_AB for c in prefill)
    assert {c.SWAP_AB for c in candidates(512.0, None, weight_only=True)} == {False, True}
    only = candidates(2.0, None, weight_only=True, swapped_only=True)  # weight-only codes in fragment order
    assert all(c.SWAP_AB for c in only)
    assert {dataclasses.replace(c, SWAP_AB=False, GROUP_STEPS=False) for c in only} == {c for c in decode if not c.SWAP_AB}


def test_group_steps_are_candidates_for_weight_only_decode_tiles():
    decode = candidates(2.0, None, weight_only=True, swapped_only=True)
    stepped = [c for c in decode if c.GROUP_STEPS]
    assert {dataclasses.replace(c, GROUP_STEPS=False) for c in stepped} == {c for c in decode if not c.GROUP_STEPS}
    assert not any(c.GROUP_STEPS for c in candidates(2.0, None) + candidates(512.0, None, weight_only=True, swapped_only=True))
    tuned = configs.LaunchConfig(16, 64, 256, 1, 4, 4, SWAP_AB=True)
    assert {c.GROUP_STEPS for c in tune.refinements(tuned, tma=False)} == {False, True}
    cfg = model("tiny").config()  # the tuner keeps a candidate's GROUP_STEPS only where it changes the steps
    w4a16 = TritonKernel(cfg, *scheme("w4a16").keys)
    assert w4a16.as_run(dataclasses.replace(tuned, GROUP_STEPS=True), 512, HERE).GROUP_STEPS
    assert not w4a16.as_run(dataclasses.replace(tuned, BLOCK_K=128, GROUP_STEPS=True), 512, HERE).GROUP_STEPS
    assert not TritonKernel(cfg, None, None).as_run(dataclasses.replace(tuned, GROUP_STEPS=True), 512, HERE).GROUP_STEPS


def test_gate_and_up_in_one_tile_is_a_candidate_for_256_row_weight_only_gemm1_tiles():
    plain = candidates(512.0, None, weight_only=True, swapped_only=True)
    with_gate_up = candidates(512.0, None, weight_only=True, swapped_only=True, gate_up=True)
    one_acc = [c for c in with_gate_up if c.GATE_UP]
    assert one_acc and {c.BLOCK_M for c in one_acc} == {256}
    assert {dataclasses.replace(c, GATE_UP=False) for c in one_acc} == {c for c in plain if c.BLOCK_M == 256}
    assert [c for c in with_gate_up if not c.GATE_UP] == plain and not any(c.GATE_UP for c in plain)
    assert not any(c.GATE_UP for c in candidates(2.0, None, weight_only=True, swapped_only=True, gate_up=True))  # decode


def test_tma_weight_loads_are_candidates_for_prefill_where_the_gpu_has_tma():
    with_tma, without = candidates(512.0, None, tma=True), candidates(512.0, None)
    assert not any(c.TMA_B for c in without)
    assert {dataclasses.replace(c, TMA_B=False) for c in with_tma if c.TMA_B} == set(without)
    assert len(with_tma) == 2 * len(without)
    assert not any(c.TMA_B for c in candidates(2.0, None, tma=True) + candidates(512.0, None, weight_only=True, tma=True))


def test_candidates_are_adjusted_as_the_kernel_adjusts_block_k():
    cfg = model("tiny").config()
    lc = configs.LaunchConfig(16, 64, 64, 1, 4, 4)
    groups_of_48 = QuantKey(QuantDtype.INT4, GroupShape(1, 48), static=True, symmetric=True)
    assert TritonKernel(cfg, groups_of_48, None).as_run(lc, 7168, HERE).BLOCK_K == 16  # a tile never straddles groups unevenly
    assert TritonKernel(cfg, *scheme("nvfp4-w4a16").keys).as_run(lc, 256, HERE) == lc  # 4 whole groups of 16 per tile
    assert TritonKernel(cfg, None, None).as_run(lc, 7168, HERE) is lc
    # Codes in fragment order: a weight-only layer's, never a layer that is not weight-only.
    assert TritonKernel(cfg, *scheme("w4a16").keys).codes_permuted(7168) and not TritonKernel(cfg, None, None).codes_permuted(7168)


def test_main_merges_new_entries_into_the_data_file_and_leaves_no_partial_file(tmp_path, monkeypatch):
    path = tmp_path / "gpu.json"
    kept = {"E=8,N=1,K=1,scheme=other,gemm=1": {"1": configs.LaunchConfig(16, 32, 64, 1, 4, 4).to_dict()}}
    path.write_text(json.dumps(kept))
    picked = configs.LaunchConfig(16, 64, 128, 1, 4, 5, True)
    monkeypatch.setattr(tune, "tune_case", lambda preset, scheme_name, tokens, refine: {1: picked, 2: picked})
    assert tune.main(["--preset", "tiny", "--scheme", "w4a16", "--tokens", "1,16", "--out", str(path)]) == 0
    data = json.loads(path.read_text())
    cfg = model("tiny").config()
    gemm1 = configs.shape_key(cfg.num_experts, cfg.intermediate_size, cfg.hidden_size, "w4a16", 1)
    assert data[gemm1] == {"1": picked.to_dict(), "16": picked.to_dict()}
    assert set(data) == set(kept) | {gemm1, configs.shape_key(cfg.num_experts, cfg.hidden_size, cfg.intermediate_size, "w4a16", 2)}
    assert [p.name for p in tmp_path.iterdir()] == ["gpu.json"]


def test_jobs_compile_every_case_in_its_own_process_before_the_timed_search(tmp_path, monkeypatch, capsys):
    """--jobs: one --compile-only process per (preset, scheme, tokens) case, all finished before this process times
    the first case (which then finds the kernels in Triton's cache); a failed compile is reported, not fatal."""
    events = []

    def run(command, **kwargs):
        events.append(("compile", command[command.index("--tokens") + 1], "--refine" in command, "--compile-only" in command))
        return subprocess.CompletedProcess(command, 1 if command[command.index("--tokens") + 1] == "16" else 0, "", "boom")

    def timed_case(preset, scheme_name, tokens, refine):
        events.append(("time", str(tokens), refine, False))
        return {1: configs.LaunchConfig(16, 64, 64, 1, 4, 4)}

    monkeypatch.setattr(tune.subprocess, "run", run)
    monkeypatch.setattr(tune, "tune_case", timed_case)
    path = tmp_path / "gpu.json"
    assert tune.main(["--preset", "tiny", "--scheme", "w4a16", "--tokens", "1,16,64", "--out", str(path), "--jobs", "2", "--refine"]) == 0
    assert sorted(events[:3]) == [("compile", t, True, True) for t in ("1", "16", "64")]
    assert events[3:] == [("time", t, True, False) for t in ("1", "16", "64")]
    assert path.exists() and "compiling tiny w4a16 T=16 failed (boom)" in capsys.readouterr().err


def test_compile_only_runs_every_candidate_times_nothing_and_writes_nothing(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(tune, "tune_case", lambda *case, refine, timer: seen.append((case, refine, timer(None))))
    path = tmp_path / "gpu.json"
    assert tune.main(["--preset", "tiny", "--scheme", "w4a16,fp8-w8a16", "--tokens", "4", "--out", str(path), "--compile-only"]) == 0
    assert seen == [(("tiny", "w4a16", 4), False, 0.0), (("tiny", "fp8-w8a16", 4), False, 0.0)] and not path.exists()
    with pytest.raises(SystemExit):
        tune.main(["--preset", "tiny", "--scheme", "w4a16", "--jobs", "0"])


def test_refinements_are_the_choice_and_its_neighbours():
    lc = configs.LaunchConfig(128, 128, 64, 8, 8, 3)
    found = tune.refinements(lc, tma=True)
    assert found[0] == lc and len(found) == len(set(found)) == 16  # 128 rows: no taller tile
    assert {(c.BLOCK_N, c.num_stages, c.TMA_B, c.MMA_IN_FLIGHT) for c in found} == set(
        itertools.product((128, 256), (3, 4), (False, True), (False, True)))
    assert {c.TMA_B for c in tune.refinements(lc, tma=False)} == {False}
    assert {c.BLOCK_N for c in tune.refinements(dataclasses.replace(lc, BLOCK_N=256), tma=True)} == {256}
    small = tune.refinements(configs.LaunchConfig(64, 64, 128, 8, 4, 4), tma=False)
    assert {(c.BLOCK_M, c.num_warps) for c in small} == {(64, 4), (128, 8)} and len(small) == 8 * 2
    in_flight = tune.refinements(dataclasses.replace(lc, MMA_IN_FLIGHT=True), tma=False)
    assert in_flight[0].MMA_IN_FLIGHT and {c.MMA_IN_FLIGHT for c in in_flight} == {False, True}


def test_refine_times_the_neighbours_of_each_gemms_current_choice(monkeypatch):
    # Which neighbours a choice has is test_refinements_are_the_choice_and_its_neighbours' subject; here the first
    # few, the current choice first, are enough to check that the tuner times each once (on a GPU every candidate
    # compiles: all of them took 170 s on an H100).
    every = tune.refinements
    monkeypatch.setattr(tune, "refinements", lambda lc, tma: every(lc, tma=tma)[:4])
    timed = []

    def timer(run):
        timed.append(run.args[0].config)
        return 1e-6 * len(timed)  # the first candidate, the current choice, stays the fastest

    best = tune_case("tiny", "unquantized", tokens=3, device=DEVICE, refine=True, timer=timer)
    cfg = model("tiny").config()
    kernel = TritonKernel(cfg, None, None)
    rows = 3 * cfg.top_k
    now = {1: kernel._config(HERE, rows, cfg.intermediate_size, cfg.hidden_size, 1, 3),
           2: kernel._config(HERE, rows, cfg.hidden_size, cfg.intermediate_size, 2, 3)}
    assert best == now
    ks = {1: cfg.hidden_size, 2: cfg.intermediate_size}  # candidates as the kernel runs them, each once
    ran = {gemm: dict.fromkeys(kernel.as_run(c, ks[gemm], HERE, gemm) for c in tune.refinements(lc, tma=True)) for gemm, lc in now.items()}
    assert len(timed) == sum(map(len, ran.values())) and timed[0] == now[1]


def test_gemm1_candidates_that_quantize_in_the_epilogue_are_compared_and_timed_with_the_rest(monkeypatch):
    """fp8-block GEMM1 with 128-column tiles returns the quantized intermediate: the tuner compares it, dequantized,
    with the other candidates' (a difference above 1% would raise) and times it."""
    monkeypatch.setattr(tune, "_TILES", [(64, 128, 4, 4), (128, 128, 4, 4)])
    timed = []

    def timer(run):
        timed.append(run.args[0])
        return 1e-6 * (1 + (not run.args[0].quantizes_output))  # the candidates that quantize in the epilogue win

    best = tune_case("tiny", "fp8-block", tokens=3, device=DEVICE, timer=timer)
    kernel = TritonKernel(model("tiny").config(), *scheme("fp8-block").keys)
    assert any(g.quantizes_output for g in timed) and any(not g.quantizes_output for g in timed)
    assert kernel._quantizes_intermediate(best[1])


def test_values_dequantizes_groups_of_columns():
    codes = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    scales = torch.tensor([[2.0, 10.0], [0.5, 1.0]])
    assert torch.equal(tune.values((codes, scales)), torch.tensor([[2.0, 4.0, 30.0], [2.0, 2.5, 6.0]]))
    assert torch.equal(tune.values((codes, None)), codes) and torch.equal(tune.values(codes), codes)


@pytest.mark.parametrize("gemm1_rows", [16, 32])
def test_gemm2_candidates_that_cannot_read_gemm1s_table_pay_for_their_own(monkeypatch, gemm1_rows):
    """A forward builds a second block table when GEMM2's BLOCK_M does not divide GEMM1's: the tuner times it. A GEMM2
    whose BLOCK_M divides GEMM1's reads GEMM1's table, as a forward does (TritonKernel.shares_table)."""
    monkeypatch.setattr(tune, "_TILES", [(64, 128, 4, 4)])
    monkeypatch.setattr(TritonKernel, "pair_table_max_pairs", 0)  # block tables at every size (PairTables are not built)
    built = []
    real_table = kernel_module.standard_table
    monkeypatch.setattr(kernel_module, "standard_table", lambda *args, **kw: built.append(args[3]) or real_table(*args, **kw))
    timed = []  # (gemm launch, the tables its timed run built)

    def timer(run):
        before = len(built)
        run()
        timed.append((run.args[0], built[before:]))
        faster = 1 if gemm1_rows == 16 else -1  # 16: the first candidate (16 rows) stays the fastest; 32: the last
        return 1e-3 + faster * 1e-6 * len(timed)

    best = tune_case("tiny", "unquantized", tokens=64, device=DEVICE, timer=timer)  # 16 rows per expert: 16- and 32-row tiles
    assert best[1].BLOCK_M == gemm1_rows
    assert best[1].MMA_IN_FLIGHT == (gemm1_rows == 32)  # the winner with MMA_IN_FLIGHT, timed last, is kept only if faster
    gemm1, gemm2 = timed[: len(timed) // 2], timed[len(timed) // 2:]
    assert {g.config.BLOCK_M for g, _ in gemm2} == {16, 32}
    for g, tables in gemm2:
        shares = gemm1_rows % g.config.BLOCK_M == 0
        assert g.table_m == (gemm1_rows if shares else g.config.BLOCK_M)
        assert tables == ([] if shares else [g.config.BLOCK_M]), (g.config, tables)
    assert all(tables == [] for _, tables in gemm1)  # GEMM1's table is built in every forward: not part of its step


def test_a_candidate_whose_result_leaves_the_numerics_budget_stops_the_tuner(monkeypatch):
    """Candidates may round differently (an fp8 intermediate moves by 1/16 per flipped rounding) but must agree within
    the scheme's budget; one that computes something else is a kernel bug, never a timing."""
    monkeypatch.setattr(tune, "_TILES", [(16, 32, 4, 4), (32, 32, 4, 4)])
    real_values = tune.values
    calls = []

    def values(out):
        calls.append(out)
        got = real_values(out)
        return got if len(calls) == 1 else got * 1.1  # every candidate after the first is 10% off

    monkeypatch.setattr(tune, "values", values)
    budget = tolerance(scheme("fp8-block").activation_key, model("tiny").config().dtype)
    assert budget < 0.1
    with pytest.raises(AssertionError, match=rf"changes the result of GEMM1 \(relative difference 0.1 > {budget:.3g}, the scheme's numerics budget\)"):
        tune_case("tiny", "fp8-block", tokens=3, device=DEVICE, timer=lambda run: 1e-6)


def test_fused_candidates_keep_the_programs_near_the_sms():
    """Qwen3-30B-A3B at one token (8 blocks, I = 768) on 132 SMs: COLS 16 to 64 (384 to 96 programs); 96 and 128 leave
    half the SMs idle. BLOCK_N is the power of two at or above COLS."""
    found = tune.fused_candidates(8, 768, 132)
    assert sorted({fc.COLS for fc in found}) == [16, 24, 32, 48, 64]
    assert all(fc.BLOCK_N >= fc.COLS and fc.BLOCK_N < 2 * fc.COLS or fc.BLOCK_N == fc.COLS for fc in found)
    assert len(found) == 5 * len(tune._FUSED_LAUNCH)


@pytest.mark.parametrize("fused_faster", [True, False])
def test_the_fused_search_writes_its_fastest_config_only_when_it_beats_the_two_gemms(fused_faster, monkeypatch):
    """The first timing is the two GEMMs' forward; the candidates follow, each 10% faster than the one before."""
    monkeypatch.setattr(tune, "_FUSED_LAUNCH", ((4, 3),))
    monkeypatch.setattr(tune, "_FUSED_PROGRAMS_PER_SM", (0.0, 1e9))
    start = 1.0 if fused_faster else 1e-3
    times = iter([start] + [0.5 * 0.9 ** i for i in range(100)])
    timed = []

    def timer(run):
        timed.append(run)
        return next(times)

    entry = tune.tune_fused_case("tiny", "unquantized", tokens=2, device=DEVICE, timer=timer)
    tried = len(timed) - 1
    assert tried == len(tune._FUSED_COLS)
    if fused_faster:
        assert entry == tune.fused_candidates(1, model("tiny").config().intermediate_size, 1)[-1]
    else:
        assert entry is None


def test_the_fused_search_skips_what_cannot_take_the_one_launch_layer():
    assert tune.tune_fused_case("tiny", "w4a16", tokens=2, device=DEVICE, timer=lambda run: 1.0) is False
    assert tune.tune_fused_case("tiny", "unquantized", tokens=4096, device=DEVICE, timer=lambda run: 1.0) is False


def test_main_writes_fused_entries_under_the_fused_key(tmp_path, monkeypatch):
    path = tmp_path / "gpu.json"
    picked = configs.FusedConfig(16, 64, 48, 128, 128, 4, 4)
    answers = {1: picked, 16: None, 64: False}
    monkeypatch.setattr(tune, "tune_fused_case", lambda preset, scheme_name, tokens: answers[tokens])
    assert tune.main(["--preset", "tiny", "--scheme", "unquantized", "--tokens", "1,16,64", "--fused", "--out", str(path)]) == 0
    cfg = model("tiny").config()
    key = configs.shape_key(cfg.num_experts, cfg.intermediate_size, cfg.hidden_size, "unquantized", "fused")
    assert json.loads(path.read_text()) == {key: {"1": picked.to_dict(), "16": None}}


def _tree(directory) -> dict:
    """Every file under ``directory`` with its size and modification time."""
    return {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in directory.rglob("*") if p.is_file()}


def test_main_writes_the_users_file_in_the_cache_directory_never_into_the_package(tmp_path, monkeypatch):
    """Without --out the tuned entries go to this device's file under MOE_CORE_CACHE_DIR, which the backend then reads
    over the packaged data; the package's own files are left as they were."""
    monkeypatch.setenv("MOE_CORE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(tune.torch.cuda, "get_device_name", lambda *a: "NVIDIA H100 80GB HBM3")
    packaged = _tree(configs.CONFIG_DIR)
    cfg = model("tiny").config()
    picked = configs.LaunchConfig(16, 64, 128, 1, 4, 5, True)
    monkeypatch.setattr(tune, "tune_case", lambda preset, scheme_name, tokens, refine: {1: picked})
    assert tune.main(["--preset", "tiny", "--scheme", "w4a16", "--tokens", "16"]) == 0
    written = tmp_path / "cache" / "triton" / "configs" / "nvidia_h100_80gb_hbm3.json"
    key = configs.shape_key(cfg.num_experts, cfg.intermediate_size, cfg.hidden_size, "w4a16", 1)
    assert json.loads(written.read_text()) == {key: {"16": picked.to_dict()}}
    assert _tree(configs.CONFIG_DIR) == packaged
    assert configs.choose("NVIDIA H100 80GB HBM3", key, 16, configs.LaunchConfig(32, 64, 64, 8, 4, 4)) == picked
